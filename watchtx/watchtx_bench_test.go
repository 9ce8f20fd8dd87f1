package watchtx

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stockguard/stockguard/internal/backends/backendstest"
	"github.com/stockguard/stockguard/internal/rediskeys"
	"github.com/stockguard/stockguard/internal/redistest"
)

// hotSKU stocks one SKU that cannot run out during a benchmark and returns
// a fresh Inventory (default policy, retry counter at 0) on it.
func hotSKU(b *testing.B, rdb *redis.Client) (*Inventory, string) {
	inv, err := New(rdb, WithPrefix("bench:"))
	if err != nil {
		b.Fatal(err)
	}
	sku := redistest.HotSKU(b, inv)
	b.Cleanup(func() { rdb.Del(context.Background(), rediskeys.Keys{Prefix: "bench:"}.Stock(sku)) })
	return inv, sku
}

// BenchmarkInventory decrements one hot SKU from 1, 16 and 64 goroutines
// with the default retry policy, reporting successful decrements/s and
// retries per decrement.
func BenchmarkInventory(b *testing.B) {
	rdb := backendstest.RedisClient(b)
	for _, workers := range []int{1, 16, 64} {
		b.Run(fmt.Sprintf("workers=%d", workers), func(b *testing.B) {
			inv, sku := hotSKU(b, rdb)
			b.ResetTimer()
			d := redistest.DecrementN(b, inv, sku, workers, b.N)
			b.ReportMetric(float64(b.N)/d.Seconds(), "decrements/s")
			b.ReportMetric(float64(inv.Retries())/float64(b.N), "retries/op")
		})
	}
}

// BenchmarkInventoryScaling compares 64 goroutines with 1 on one hot SKU,
// taking turns in rounds so that the noise of a shared machine hits both
// alike. The timer covers the 64-goroutine runs; ratio is their throughput
// over the 1-goroutine runs' (1.0: no loss to contention).
func BenchmarkInventoryScaling(b *testing.B) {
	rdb := backendstest.RedisClient(b)
	const workers, rounds = 64, 4
	b.Run(fmt.Sprintf("workers=%d", workers), func(b *testing.B) {
		inv, sku := hotSKU(b, rdb)
		solo, soloSKU := hotSKU(b, rdb)
		per := max(b.N/rounds, 1)
		var many, one time.Duration
		b.ResetTimer()
		for range rounds {
			b.StopTimer()
			one += redistest.DecrementN(b, solo, soloSKU, 1, per)
			b.StartTimer()
			many += redistest.DecrementN(b, inv, sku, workers, per)
		}
		b.StopTimer()
		manyRate := float64(rounds*per) / many.Seconds()
		oneRate := float64(rounds*per) / one.Seconds()
		b.ReportMetric(manyRate, "decrements/s")
		b.ReportMetric(oneRate, "decrements/s-1worker")
		b.ReportMetric(manyRate/oneRate, "ratio")
		b.ReportMetric(float64(inv.Retries())/float64(rounds*per), "retries/op")
	})
}
