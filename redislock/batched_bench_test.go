package redislock

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stockguard/stockguard"
	"github.com/stockguard/stockguard/internal/backends/backendstest"
	"github.com/stockguard/stockguard/internal/must"
	"github.com/stockguard/stockguard/internal/rediskeys"
	"github.com/stockguard/stockguard/internal/redistest"
)

// timedRun is what decrementTimed measured.
type timedRun struct {
	ops  int
	wall time.Duration
	lat  []time.Duration // one per decrement, unsorted
}

// decrementTimed takes 1 unit of sku from workers goroutines, n times in
// all, or, when n is 0, for about d; it times each decrement. An error is
// reported to b and stops its worker.
func decrementTimed(b *testing.B, inv stockguard.Decrementer, sku string, workers, n int, d time.Duration) timedRun {
	var next atomic.Int64
	lats := make([][]time.Duration, workers)
	var wg sync.WaitGroup
	ctx := context.Background()
	start := time.Now()
	more := func() bool {
		if n > 0 {
			return next.Add(1) <= int64(n)
		}
		return time.Since(start) < d
	}
	for w := range workers {
		wg.Go(func() {
			for more() {
				t0 := time.Now()
				if err := inv.Decrement(ctx, sku, 1); err != nil {
					b.Error(err)
					return
				}
				lats[w] = append(lats[w], time.Since(t0))
			}
		})
	}
	wg.Wait()
	r := timedRun{wall: time.Since(start), lat: slices.Concat(lats...)}
	r.ops = len(r.lat)
	return r
}

// add appends o's decrements to r's.
func (r *timedRun) add(o timedRun) {
	r.ops += o.ops
	r.wall += o.wall
	r.lat = append(r.lat, o.lat...)
}

func (r timedRun) rate() float64 { return float64(r.ops) / r.wall.Seconds() }

// p99 returns the 99th percentile latency in milliseconds.
func (r timedRun) p99() float64 {
	if len(r.lat) == 0 {
		return 0
	}
	slices.Sort(r.lat)
	return float64(r.lat[(len(r.lat)*99)/100]) / float64(time.Millisecond)
}

// hotKey stocks a fresh hot SKU for inv, deleted when b ends, and returns
// it.
func hotKey(b *testing.B, inv stockguard.Inventory, keys rediskeys.Keys) string {
	sku := redistest.HotSKU(b, inv)
	rdb := backendstest.RedisClient(b)
	b.Cleanup(func() { rdb.Del(context.Background(), keys.Stock(sku)) })
	return sku
}

// BenchmarkBatched decrements one hot SKU from 1, 16 and 64 goroutines.
func BenchmarkBatched(b *testing.B) {
	rdb := backendstest.RedisClient(b)
	keys := rediskeys.Keys{Prefix: "bench:"}
	for _, workers := range []int{1, 16, 64} {
		b.Run(fmt.Sprintf("workers=%d", workers), func(b *testing.B) {
			inv, err := NewBatched(rdb, WithPrefix(keys.Prefix))
			if err != nil {
				b.Fatal(err)
			}
			sku := hotKey(b, inv, keys)
			b.ResetTimer()
			r := decrementTimed(b, inv, sku, workers, b.N, 0)
			b.StopTimer()
			s := inv.Stats()
			b.ReportMetric(r.rate(), "decrements/s")
			b.ReportMetric(r.p99(), "p99-ms")
			b.ReportMetric(float64(s.Requests)/float64(s.Batches), "requests/call")
		})
	}
}

// BenchmarkBatchedVsAtomic measures NewBatched against NewAtomic, one hot
// SKU each, 64 goroutines, on the same server and client. They take turns,
// in rounds, so that the noise of a shared machine hits both alike: each
// round runs Batched for b.N/rounds decrements (timed), then Atomic for as
// long as Batched took. The metrics are both strategies' decrements/s and
// p99 latencies, the ratio of the rates, and Batched's mean requests per
// script call; the stock both keys lost must equal the decrements counted.
func BenchmarkBatchedVsAtomic(b *testing.B) {
	rdb := backendstest.RedisClient(b)
	const workers, rounds = 64, 4
	b.Run(fmt.Sprintf("workers=%d", workers), func(b *testing.B) {
		keys := rediskeys.Keys{Prefix: "bench:"}
		batched, atom := must.New(NewBatched(rdb, WithPrefix(keys.Prefix))), must.New(NewAtomic(rdb, WithPrefix(keys.Prefix)))
		bSKU, aSKU := hotKey(b, batched, keys), hotKey(b, atom, keys)
		per := max(b.N/rounds, 1)
		var br, ar timedRun
		b.ResetTimer()
		for range rounds {
			b.StartTimer()
			r := decrementTimed(b, batched, bSKU, workers, per, 0)
			b.StopTimer()
			br.add(r)
			ar.add(decrementTimed(b, atom, aSKU, workers, 0, r.wall))
		}
		for _, c := range []struct {
			sku string
			ops int
		}{{bSKU, br.ops}, {aSKU, ar.ops}} {
			if left, err := batched.Stock(b.Context(), c.sku); err != nil || left != stockguard.MaxQty-int64(c.ops) {
				b.Fatalf("%q holds %d, %v; want %d", c.sku, left, err, stockguard.MaxQty-int64(c.ops))
			}
		}
		s := batched.Stats()
		b.ReportMetric(br.rate(), "decrements/s")
		b.ReportMetric(ar.rate(), "atomic-decrements/s")
		b.ReportMetric(br.rate()/ar.rate(), "ratio")
		b.ReportMetric(br.p99(), "p99-ms")
		b.ReportMetric(ar.p99(), "atomic-p99-ms")
		b.ReportMetric(float64(s.Requests)/float64(s.Batches), "requests/call")
	})
}
