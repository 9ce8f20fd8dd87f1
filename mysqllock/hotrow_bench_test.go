package mysqllock

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
	"github.com/jmoiron/sqlx"
	"github.com/stockguard/stockguard"
	"github.com/stockguard/stockguard/internal/backends"
	"github.com/stockguard/stockguard/internal/backends/backendstest"
	"github.com/stockguard/stockguard/internal/must"
	"github.com/stockguard/stockguard/strategy"
)

// hotRowStrategies builds every strategy of the package, with its default
// options, on table.
func hotRowStrategies(db *sqlx.DB, table string) map[string]stockguard.Inventory {
	all := strategies(db, WithTable(table))
	all["segmented"] = must.New(NewSegmented(db, WithTable(table)))
	all["batched"] = must.New(NewBatched(db, WithTable(table)))
	return all
}

// BenchmarkHotRow runs every strategy on one hot SKU that never sells out,
// at 1, 8 and 64 concurrent buyers sharing one instance, over a pool with
// interpolateParams=true; the strategies of one worker count run one after
// the other, so their ratios are measured side by side. b.N is the number
// of Decrement calls. Metrics: decrements/s (successful ones), p50-ms and
// p99-ms (latency of a call, from per-worker HDR histograms), errors/op,
// retries/op, client_cpu_us_per_op (the test process's user and system CPU
// per call: what the client costs a machine it shares with the server),
// and for batched requests/batch.
//
//	go test -run '^$' -bench BenchmarkHotRow -benchtime 2s ./mysqllock/
func BenchmarkHotRow(b *testing.B) {
	db := testDB(b, interpolate)
	table := newSegTable(b, db)
	names := append(slices.Clip(strategyNames), "segmented", "batched")
	for _, workers := range []int{1, 8, 64} {
		for _, name := range names {
			b.Run(fmt.Sprintf("strategy=%s/workers=%d", name, workers), func(b *testing.B) {
				hotRow(b, backendstest.SharedMySQL(b).Proc, hotRowStrategies(db, table)[name], fmt.Sprintf("hot-%s-%d", name, workers), workers)
			})
		}
	}
}

// hotRow shares b.N one-unit decrements of sku among workers goroutines,
// timing each, then checks that the stock went down by exactly the units
// acknowledged. srv is the server's process when the tests started it
// (server_cpu_us_per_op), else nil.
func hotRow(b *testing.B, srv *backends.Process, inv stockguard.Inventory, sku string, workers int) {
	ctx := context.Background()
	if err := inv.SetStock(ctx, sku, stockguard.MaxQty); err != nil {
		b.Fatal(err)
	}
	type tally struct {
		lat    *hdrhistogram.Histogram // µs, 2 significant digits
		failed int64
		stray  error // the first error outside the contract
	}
	tallies := make([]tally, workers)
	for i := range tallies {
		tallies[i].lat = hdrhistogram.New(1, int64(time.Minute/time.Microsecond), 2)
	}
	var retries0 int64
	rc, _ := inv.(strategy.RetryCounter)
	if rc != nil {
		retries0 = rc.Retries()
	}
	var next atomic.Int64
	var wg sync.WaitGroup
	b.ResetTimer()
	cpu := backendstest.StartCPU(b, srv)
	began := time.Now()
	for w := range tallies {
		wg.Go(func() {
			t := &tallies[w]
			for next.Add(1) <= int64(b.N) {
				start := time.Now()
				err := inv.Decrement(ctx, sku, 1)
				t.lat.RecordValue(max(1, time.Since(start).Microseconds()))
				if err != nil {
					t.failed++
					if t.stray == nil && !strategy.IsContract(err) {
						t.stray = err
					}
				}
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(began)
	cpu.Report(b)
	b.StopTimer()

	lat := hdrhistogram.New(1, int64(time.Minute/time.Microsecond), 2)
	var failed int64
	for _, t := range tallies {
		lat.Merge(t.lat)
		failed += t.failed
		if t.stray != nil {
			b.Fatalf("non-contract error: %v", t.stray)
		}
	}
	acked := int64(b.N) - failed
	left, err := inv.Stock(ctx, sku)
	if err != nil {
		b.Fatal(err)
	}
	if gone := stockguard.MaxQty - left; gone != acked {
		b.Fatalf("%d units gone, %d acknowledged", gone, acked)
	}
	b.ReportMetric(float64(acked)/elapsed.Seconds(), "decrements/s")
	b.ReportMetric(float64(lat.ValueAtQuantile(50))/1000, "p50-ms")
	b.ReportMetric(float64(lat.ValueAtQuantile(99))/1000, "p99-ms")
	b.ReportMetric(float64(failed)/float64(b.N), "errors/op")
	if rc != nil {
		b.ReportMetric(float64(rc.Retries()-retries0)/float64(b.N), "retries/op")
	}
	if bt, ok := inv.(*Batched); ok {
		s := bt.Stats()
		b.ReportMetric(float64(s.Requests)/float64(max(1, s.Batches)), "requests/batch")
	}
}
