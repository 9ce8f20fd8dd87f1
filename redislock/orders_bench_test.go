package redislock

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	mrand "math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stockguard/stockguard"
	"github.com/stockguard/stockguard/internal/backends/backendstest"
	"github.com/stockguard/stockguard/internal/redistest"
)

// runN calls op(worker, i) for i in 0…n-1 from workers goroutines and
// returns the wall time and every call's latency. An error is reported
// to b and stops its worker.
func runN(b *testing.B, workers, n int, op func(w int, i int64) error) (time.Duration, []time.Duration) {
	var next atomic.Int64
	var wg sync.WaitGroup
	lat := make([][]time.Duration, workers)
	start := time.Now()
	for w := range workers {
		wg.Go(func() {
			for i := next.Add(1) - 1; i < int64(n); i = next.Add(1) - 1 {
				t0 := time.Now()
				if err := op(w, i); err != nil {
					b.Error(err)
					return
				}
				lat[w] = append(lat[w], time.Since(t0))
			}
		})
	}
	wg.Wait()
	return time.Since(start), slices.Concat(lat...)
}

// p99 is the 99th percentile of lat.
func p99(lat []time.Duration) time.Duration {
	if len(lat) == 0 {
		return 0
	}
	slices.Sort(lat)
	return lat[len(lat)*99/100]
}

// BenchmarkCheckoutHotSKU takes one unit of one hot SKU per call from 64
// goroutines, as single-line orders (Take under a fresh ID) and as plain
// Decrements, in alternating rounds so that a shared machine's noise hits
// both alike; it reports both rates and orders/decrements. Run with
//
//	go test -run '^$' -bench CheckoutHotSKU -benchtime 20000x ./redislock
func BenchmarkCheckoutHotSKU(b *testing.B) {
	rdb := backendstest.RedisClient(b)
	const workers, rounds = 64, 4
	b.Run(fmt.Sprintf("workers=%d/skus=1/lines=1", workers), func(b *testing.B) {
		a, err := NewAtomic(rdb, WithPrefix(redistest.Prefix(b, rdb)))
		if err != nil {
			b.Fatal(err)
		}
		sku := redistest.HotSKU(b, a)
		run := rand.Text()[:8]
		per := max(b.N/rounds, 1)
		var orderTime, decTime time.Duration
		var orders int64
		b.ResetTimer()
		for range rounds {
			d, _ := runN(b, workers, per, func(_ int, _ int64) error { return a.Decrement(context.Background(), sku, 1) })
			decTime += d
			d, _ = runN(b, workers, per, func(_ int, _ int64) error {
				return a.Take(context.Background(), fmt.Sprintf("%s-%d", run, atomic.AddInt64(&orders, 1)), stockguard.Line{SKU: sku, Qty: 1})
			})
			orderTime += d
		}
		b.StopTimer()
		if left, err := a.Stock(b.Context(), sku); err != nil || left != stockguard.MaxQty-int64(2*rounds*per) {
			b.Fatalf("Stock = %d, %v; want %d", left, err, stockguard.MaxQty-int64(2*rounds*per))
		}
		orderRate := float64(rounds*per) / orderTime.Seconds()
		decRate := float64(rounds*per) / decTime.Seconds()
		b.ReportMetric(orderRate, "orders/s")
		b.ReportMetric(decRate, "decrements/s")
		b.ReportMetric(orderRate/decRate, "ratio")
	})
}

// BenchmarkCheckoutCarts takes 3-line carts over 100 SKUs drawn by a Zipf
// law (s 1.1), from 64 goroutines, on one Redis and on the 3-master
// cluster (where most carts span slots: the two-phase protocol). It
// reports orders/s, lines/s and the p99 latency of a Take. Run with
//
//	go test -run '^$' -bench CheckoutCarts -benchtime 20000x ./redislock
func BenchmarkCheckoutCarts(b *testing.B) {
	const workers, skus, lines = 64, 100, 3
	for _, target := range []struct {
		name string
		rdb  func(b *testing.B) redis.UniversalClient
	}{
		{"redis", func(b *testing.B) redis.UniversalClient { return backendstest.RedisClient(b) }},
		{"cluster", func(b *testing.B) redis.UniversalClient {
			c := backendstest.SharedCluster(b).Client()
			b.Cleanup(func() { c.Close() })
			return c
		}},
	} {
		b.Run(fmt.Sprintf("target=%s/workers=%d/skus=%d/lines=%d", target.name, workers, skus, lines), func(b *testing.B) {
			rdb := target.rdb(b)
			a, err := NewAtomic(rdb, WithPrefix(redistest.Prefix(b, rdb)))
			if err != nil {
				b.Fatal(err)
			}
			names := make([]string, skus)
			for i := range names {
				names[i] = fmt.Sprintf("sku-%d", i)
				if err := a.SetStock(b.Context(), names[i], stockguard.MaxQty); err != nil {
					b.Fatal(err)
				}
			}
			carts := make([][]stockguard.Line, b.N)
			rng := mrand.New(mrand.NewPCG(1, 2))
			zipf := mrand.NewZipf(rng, 1.1, 1, skus-1)
			for i := range carts {
				seen := map[uint64]bool{}
				for len(carts[i]) < lines {
					if k := zipf.Uint64(); !seen[k] {
						seen[k] = true
						carts[i] = append(carts[i], stockguard.Line{SKU: names[k], Qty: 1 + int64(k%3)})
					}
				}
			}
			run := rand.Text()[:8]
			b.ResetTimer()
			var cpu *backendstest.CPU
			if c, ok := rdb.(*redis.Client); ok { // one server; a cluster's are several
				cpu = backendstest.StartRedisCPU(b, c)
			}
			d, lat := runN(b, workers, b.N, func(_ int, i int64) error {
				err := a.Take(context.Background(), fmt.Sprintf("%s-%d", run, i), carts[i]...)
				if errors.Is(err, stockguard.ErrInsufficientStock) {
					return nil
				}
				return err
			})
			if cpu != nil {
				cpu.Report(b)
			}
			b.StopTimer()
			b.ReportMetric(float64(b.N)/d.Seconds(), "orders/s")
			b.ReportMetric(float64(b.N*lines)/d.Seconds(), "lines/s")
			b.ReportMetric(float64(p99(lat).Microseconds())/1000, "p99-ms")
		})
	}
}
