package redislock

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stockguard/stockguard"
	"github.com/stockguard/stockguard/internal/backends/backendstest"
	"github.com/stockguard/stockguard/internal/must"
	"github.com/stockguard/stockguard/internal/redistest"
)

// takeN makes n requests for 1 unit of sku with workers goroutines and
// returns the wall time and the units taken; a request given up as
// stockguard.ErrContention is counted, not retried.
func takeN(b *testing.B, inv stockguard.Decrementer, sku string, workers, n int) (time.Duration, int64) {
	var next, taken atomic.Int64
	var wg sync.WaitGroup
	ctx := context.Background()
	start := time.Now()
	for range workers {
		wg.Go(func() {
			for next.Add(1) <= int64(n) {
				switch err := inv.Decrement(ctx, sku, 1); {
				case err == nil:
					taken.Add(1)
				case !errors.Is(err, stockguard.ErrContention):
					b.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	return time.Since(start), taken.Load()
}

// BenchmarkHotSKU decrements one hot SKU from 64 goroutines: the
// single-key Lua take (NewAtomic) against the segmented stock (default 8
// segments) and the segment locks (WithSegmentLocks), on one Redis server and on the
// 3-master cluster, in one run. The stock never runs out, so every take
// without segment locks is a fast-path one. Metrics: decrements/s
// (successful), contention/op (requests given up).
func BenchmarkHotSKU(b *testing.B) {
	single := backendstest.RedisClient(b)
	cluster := backendstest.SharedCluster(b).Client()
	b.Cleanup(func() { cluster.Close() })
	const workers = 64
	for _, backend := range []struct {
		name string
		rdb  redis.UniversalClient
	}{{"single", single}, {"cluster", cluster}} {
		prefix := "bench:" + strconv.FormatInt(time.Now().UnixNano(), 36) + ":"
		strategies := []struct {
			name string
			inv  stockguard.Inventory
		}{
			{"atomic", must.New(NewAtomic(backend.rdb, WithPrefix(prefix)))},
			{"segmented", must.New(NewSegmented(backend.rdb, WithPrefix(prefix)))},
			{"segmented-locks", must.New(NewSegmented(backend.rdb, WithPrefix(prefix), WithSegmentLocks()))},
		}
		b.Cleanup(func() {
			ctx := context.Background()
			for _, k := range redistest.Keys(ctx, b, backend.rdb, prefix) {
				backend.rdb.Del(ctx, k)
			}
		})
		for _, s := range strategies {
			b.Run(fmt.Sprintf("backend=%s/strategy=%s/workers=%d", backend.name, s.name, workers), func(b *testing.B) {
				if err := s.inv.SetStock(b.Context(), "hot", stockguard.MaxQty); err != nil {
					b.Fatal(err)
				}
				takeN(b, s.inv, "hot", workers, 1000) // warm-up: connections, scripts
				b.ResetTimer()
				d, taken := takeN(b, s.inv, "hot", workers, b.N)
				b.ReportMetric(float64(taken)/d.Seconds(), "decrements/s")
				b.ReportMetric(float64(int64(b.N)-taken)/float64(b.N), "contention/op")
			})
		}
	}
}
