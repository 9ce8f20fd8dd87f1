package pglock

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stockguard/stockguard"
	"github.com/stockguard/stockguard/internal/backends/backendstest"
	"github.com/stockguard/stockguard/internal/must"
	"github.com/stockguard/stockguard/strategy"
)

// BenchmarkHotRow runs every strategy on one hot SKU that never sells out,
// at 16 and 64 concurrent buyers sharing one instance; the strategies of
// one worker count run one after the other, so their ratios are measured
// side by side. b.N is the number of Decrement calls. Metrics: calls/s
// (successful ones), p50-ms, p99-ms, errors/op.
//
//	go test -run '^$' -bench BenchmarkHotRow -benchtime 3s ./pglock/
func BenchmarkHotRow(b *testing.B) {
	db := testDB(b)
	db.SetMaxOpenConns(96)
	table := newTable(b, db)
	all := strategies(db, WithTable(table))
	all["segmented"] = must.New(NewSegmented(db, WithTable(table)))
	for _, workers := range []int{16, 64} {
		for _, name := range append(strategyNames, "segmented") {
			b.Run(fmt.Sprintf("strategy=%s/workers=%d", name, workers), func(b *testing.B) {
				inv := all[name]
				sku := fmt.Sprintf("hot-%s-%d", name, workers)
				if err := inv.SetStock(b.Context(), sku, stockguard.MaxQty); err != nil {
					b.Fatal(err)
				}
				calls(b, workers, func(ctx context.Context, _ int64) error { return inv.Decrement(ctx, sku, 1) })
				left, err := inv.Stock(b.Context(), sku)
				if err != nil {
					b.Fatal(err)
				}
				if gone, acked := stockguard.MaxQty-left, acked(b); gone != acked {
					b.Fatalf("%d units gone, %d acknowledged", gone, acked)
				}
			})
		}
	}
}

// BenchmarkOrders compares single-line Take under a fresh ID with
// Decrement on one hot SKU, 64 workers, on the two strategies that
// implement Orders: what the ledger costs.
//
//	go test -run '^$' -bench BenchmarkOrders -benchtime 3s ./pglock/
func BenchmarkOrders(b *testing.B) {
	db := testDB(b)
	db.SetMaxOpenConns(96)
	const workers = 64
	for _, name := range orderStrategyNames {
		for _, op := range []string{"decrement", "take"} {
			b.Run(fmt.Sprintf("strategy=%s/op=%s/workers=%d", name, op, workers), func(b *testing.B) {
				table := newTable(b, db)
				o := orderStrategies(db, WithTable(table))[name]
				if err := o.SetStock(b.Context(), "hot", stockguard.MaxQty); err != nil {
					b.Fatal(err)
				}
				calls(b, workers, func(ctx context.Context, i int64) error {
					if op == "take" {
						return o.Take(ctx, fmt.Sprintf("order-%010d", i), stockguard.Line{SKU: "hot", Qty: 1})
					}
					return o.Decrement(ctx, "hot", 1)
				})
				left, err := o.Stock(b.Context(), "hot")
				if err != nil {
					b.Fatal(err)
				}
				if gone, acked := stockguard.MaxQty-left, acked(b); gone != acked {
					b.Fatalf("%d units gone, %d acknowledged", gone, acked)
				}
			})
		}
	}
}

// BenchmarkPool compares the two ways a Go service reaches PostgreSQL
// through pgx on Atomic's one statement, 16 workers: database/sql with
// pgx's stdlib driver (the package's API: the caller's *sqlx.DB) and pgx's
// native pool (pgxpool), sending the same UPDATE … RETURNING.
//
//	go test -run '^$' -bench BenchmarkPool -benchtime 3s ./pglock/
func BenchmarkPool(b *testing.B) {
	db := testDB(b)
	table := newTable(b, db)
	a, err := NewAtomic(db, WithTable(table))
	if err != nil {
		b.Fatal(err)
	}
	pool, err := pgxpool.New(b.Context(), backendstest.SharedPostgres(b).DSN+"&pool_max_conns=32")
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(pool.Close)
	take := a.q.take
	for _, via := range []string{"database-sql", "pgxpool"} {
		b.Run(fmt.Sprintf("pool=%s/workers=16", via), func(b *testing.B) {
			sku := "hot-" + via
			if err := a.SetStock(b.Context(), sku, stockguard.MaxQty); err != nil {
				b.Fatal(err)
			}
			calls(b, 16, func(ctx context.Context, _ int64) error {
				if via == "pgxpool" {
					var left int64
					return pool.QueryRow(ctx, take, 1, sku).Scan(&left)
				}
				return a.Decrement(ctx, sku, 1)
			})
		})
	}
}

// ackedCounts holds, per benchmark, the successful calls of its last calls run.
var ackedCounts sync.Map // *testing.B → int64

func acked(b *testing.B) int64 {
	v, _ := ackedCounts.Load(b)
	n, _ := v.(int64)
	return n
}

// calls shares b.N calls of call among workers goroutines, timing each,
// and reports calls/s (successful ones), p50-ms, p99-ms, errors/op and the
// CPU per call of this process (client_cpu_us_per_op) and of PostgreSQL's
// processes when the tests started it (server_cpu_us_per_op). A failed call
// must fail with a contract error.
func calls(b *testing.B, workers int, call func(ctx context.Context, i int64) error) {
	ctx := context.Background()
	lats := make([]*hdrhistogram.Histogram, workers)
	failed := make([]int64, workers)
	var next atomic.Int64
	var wg sync.WaitGroup
	b.ResetTimer()
	cpu := backendstest.StartCPU(b, backendstest.SharedPostgres(b).Proc)
	began := time.Now()
	for w := range workers {
		lats[w] = hdrhistogram.New(1, int64(time.Minute/time.Microsecond), 2)
		wg.Go(func() {
			for i := next.Add(1); i <= int64(b.N); i = next.Add(1) {
				start := time.Now()
				err := call(ctx, i)
				lats[w].RecordValue(max(1, time.Since(start).Microseconds()))
				if err != nil {
					failed[w]++
					if !strategy.IsContract(err) {
						b.Errorf("non-contract error: %v", err)
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
	var errs int64
	for w := range workers {
		lat.Merge(lats[w])
		errs += failed[w]
	}
	ackedCounts.Store(b, int64(b.N)-errs)
	b.ReportMetric(float64(int64(b.N)-errs)/elapsed.Seconds(), "calls/s")
	b.ReportMetric(float64(lat.ValueAtQuantile(50))/1000, "p50-ms")
	b.ReportMetric(float64(lat.ValueAtQuantile(99))/1000, "p99-ms")
	b.ReportMetric(float64(errs)/float64(b.N), "errors/op")
}

// BenchmarkRestock times Restock (one at a time, fresh IDs) on a SKU whose
// ledger holds orders=N taken orders: the room check's cost as the ledger
// grows, which the row's lock is held for. The ledger is filled by SQL and
// on_orders by CreateSchema's upgrade.
//
//	go test -run '^$' -bench BenchmarkRestock -benchtime 2s ./pglock/
func BenchmarkRestock(b *testing.B) {
	db := testDB(b)
	for _, n := range []int{1_000, 100_000} {
		b.Run(fmt.Sprintf("orders=%d", n), func(b *testing.B) {
			table := newTable(b, db)
			ctx := b.Context()
			a, err := NewAtomic(db, WithTable(table))
			if err != nil {
				b.Fatal(err)
			}
			if err := a.SetStock(ctx, "hot", 1_000_000); err != nil {
				b.Fatal(err)
			}
			for _, q := range []string{
				fmt.Sprintf("INSERT INTO %s (id, kind, state, created_at, changed_at) SELECT 'fill-' || g, %d, %d, now(), now() FROM generate_series(1, %d) g",
					quote(OrdersTable(table)), kindTake, stockguard.OrderTaken, n),
				fmt.Sprintf("INSERT INTO %s (order_id, sku, qty) SELECT 'fill-' || g, 'hot', 1 FROM generate_series(1, %d) g", quote(OrderLinesTable(table)), n),
				"ALTER TABLE " + quote(table) + " DROP COLUMN IF EXISTS on_orders",
			} {
				if _, err := db.ExecContext(ctx, q); err != nil {
					b.Fatal(err)
				}
			}
			if err := CreateSchema(ctx, db, WithTable(table)); err != nil {
				b.Fatal(err)
			}
			for _, t := range Tables(table) {
				if _, err := db.ExecContext(ctx, "ANALYZE "+quote(t)); err != nil {
					b.Fatal(err)
				}
			}
			b.ResetTimer()
			for i := range b.N {
				if err := a.Restock(ctx, fmt.Sprintf("restock-%d", i), "hot", 1); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
