package redislock

import (
	"testing"
	"time"

	"github.com/stockguard/stockguard"
	"github.com/stockguard/stockguard/internal/backends/backendstest"
	"github.com/stockguard/stockguard/internal/must"
	"github.com/stockguard/stockguard/internal/redistest"
)

// BenchmarkReplicaAck measures what WithReplicaAck(1, 250ms) costs on a
// master with one replica on loopback, 64 goroutines on one hot SKU per
// strategy: redis-atomic, redis-atomic+ack, redis-batched and
// redis-batched+ack take turns, 250ms each, in rounds (b.N rounds), so
// that the noise of a shared machine hits all alike. The metrics are each
// one's decrements/s and p99, and the ratios to redis-atomic; the stock
// every SKU lost must equal the decrements counted.
//
//	go test -run '^$' -bench BenchmarkReplicaAck -benchtime 4x ./redislock/
func BenchmarkReplicaAck(b *testing.B) {
	r := backendstest.SharedReplicated(b)
	rdb := r.Client()
	b.Cleanup(func() { rdb.Close() })
	const (
		workers = 64
		slice   = 250 * time.Millisecond
	)
	prefix := redistest.Prefix(b, rdb)
	ack := WithReplicaAck(1, 250*time.Millisecond)
	variants := []struct {
		name string
		inv  stockguard.Inventory
		sku  string
		run  timedRun
	}{
		{name: "redis-atomic", inv: must.New(NewAtomic(rdb, WithPrefix(prefix)))},
		{name: "redis-atomic+ack", inv: must.New(NewAtomic(rdb, WithPrefix(prefix), ack))},
		{name: "redis-batched", inv: must.New(NewBatched(rdb, WithPrefix(prefix)))},
		{name: "redis-batched+ack", inv: must.New(NewBatched(rdb, WithPrefix(prefix), ack))},
	}
	for i := range variants {
		// Stocked without the ack, whose 250ms a loaded machine can miss
		// once; the first acknowledged take confirms the level with it.
		variants[i].sku = redistest.HotSKU(b, variants[0].inv)
	}
	b.ResetTimer()
	for range b.N {
		for i := range variants {
			v := &variants[i]
			v.run.add(decrementTimed(b, v.inv, v.sku, workers, 0, slice))
		}
	}
	b.StopTimer()
	for _, v := range variants {
		if left, err := v.inv.Stock(b.Context(), v.sku); err != nil || left != stockguard.MaxQty-int64(v.run.ops) {
			b.Fatalf("%s: %q holds %d, %v; want %d", v.name, v.sku, left, err, stockguard.MaxQty-int64(v.run.ops))
		}
	}
	base := variants[0].run.rate()
	for _, v := range variants {
		b.ReportMetric(v.run.rate(), v.name+"/s")
		b.ReportMetric(v.run.p99(), v.name+"-p99-ms")
		if v.name != variants[0].name {
			b.ReportMetric(v.run.rate()/base, v.name+"-ratio")
		}
	}
}
