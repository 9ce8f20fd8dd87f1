package mysqllock

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
	"github.com/jmoiron/sqlx"
	"github.com/stockguard/stockguard"
	"github.com/stockguard/stockguard/internal/backends/backendstest"
	"github.com/stockguard/stockguard/internal/must"
	"github.com/stockguard/stockguard/strategy"
)

// BenchmarkOrders compares, side by side in one run, on one hot SKU that
// never sells out and 64 workers sharing one instance (interpolateParams
// and multiStatements on): plain one-unit Decrements against one-unit single-line Take orders
// under fresh IDs, for NewAtomic, NewBatched and NewBatched with 4 order
// lanes; single-line Holds (never released: a Hold's lines are rows of the
// lines table, a Take's a column of its order row, see CreateSchema); then
// 5-line carts over 8 SKUs. b.N is the number of calls.
// Metrics: calls/s (successful ones), p50-ms and p99-ms, errors/op; the
// server's own counts per call — stmts/op (statements, Questions),
// commits/op, fsyncs/op (redo log), lock-waits/op and lock-ms/op (row-lock
// waits and the time spent in them); CPU per call, client_cpu_us_per_op of
// this process (the workers included) and server_cpu_us_per_op of the server
// when the tests started it; for NewBatched requests/batch or
// orders/commit; and for orders ledger-B/order: the bytes the two ledger
// tables take per recorded order, from information_schema.TABLES
// (data_length + index_length, after ANALYZE TABLE) — pages, so
// meaningful only for runs of many orders.
//
//	go test -run '^$' -bench BenchmarkOrders -benchtime 20000x ./mysqllock/
func BenchmarkOrders(b *testing.B) {
	db := testDB(b, multi)
	db.SetMaxOpenConns(96) // 64 workers and Batched's drainers, within the shared server's limit
	const workers = 64
	for _, name := range []string{"atomic", "batched", "batched-lanes4"} {
		for _, op := range []string{"decrement", "take", "hold", "cart5"} {
			b.Run(fmt.Sprintf("strategy=%s/op=%s/workers=%d", name, op, workers), func(b *testing.B) {
				table := newTable(b, db)
				o := orderStrategies(db, WithTable(table))[name]
				if name == "batched-lanes4" {
					o = must.New(NewBatched(db, WithTable(table), WithOrderLanes(4)))
				}
				ordersBench(b, db, table, o, op, workers)
			})
		}
	}
}

func ordersBench(b *testing.B, db *sqlx.DB, table string, o stockguard.Orders, op string, workers int) {
	ctx := context.Background()
	skus := []string{"hot"}
	if op == "cart5" {
		skus = []string{"c0", "c1", "c2", "c3", "c4", "c5", "c6", "c7"}
	}
	for _, sku := range skus {
		if err := o.SetStock(ctx, sku, stockguard.MaxQty); err != nil {
			b.Fatal(err)
		}
	}
	call := func(i int64) error {
		id := fmt.Sprintf("order-%010d", i)
		switch op {
		case "decrement":
			return o.Decrement(ctx, "hot", 1)
		case "take":
			return o.Take(ctx, id, stockguard.Line{SKU: "hot", Qty: 1})
		case "hold":
			return o.Hold(ctx, id, stockguard.MaxHoldTTL, stockguard.Line{SKU: "hot", Qty: 1})
		}
		lines := make([]stockguard.Line, 5)
		for k := range lines {
			lines[k] = stockguard.Line{SKU: skus[(int(i)+3*k)%len(skus)], Qty: 1}
		}
		return o.Take(ctx, id, lines...)
	}
	lats := make([]*hdrhistogram.Histogram, workers)
	failed := make([]int64, workers)
	var next atomic.Int64
	var wg sync.WaitGroup
	before := serverStatus(b, db)
	cpu := backendstest.StartCPU(b, backendstest.SharedMySQL(b).Proc)
	b.ResetTimer()
	began := time.Now()
	for w := range workers {
		lats[w] = hdrhistogram.New(1, int64(time.Minute/time.Microsecond), 2)
		wg.Go(func() {
			for i := next.Add(1); i <= int64(b.N); i = next.Add(1) {
				start := time.Now()
				err := call(i)
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
	after := serverStatus(b, db)

	lat := hdrhistogram.New(1, int64(time.Minute/time.Microsecond), 2)
	var errs int64
	for w := range workers {
		lat.Merge(lats[w])
		errs += failed[w]
	}
	acked := int64(b.N) - errs
	var gone int64
	for _, sku := range skus {
		left, err := o.Stock(ctx, sku)
		if err != nil {
			b.Fatal(err)
		}
		gone += stockguard.MaxQty - left
	}
	perCall := int64(1)
	if op == "cart5" {
		perCall = 5
	}
	if gone != acked*perCall {
		b.Fatalf("%d units gone, %d acknowledged", gone, acked*perCall)
	}
	b.ReportMetric(float64(acked)/elapsed.Seconds(), "calls/s")
	b.ReportMetric(float64(lat.ValueAtQuantile(50))/1000, "p50-ms")
	b.ReportMetric(float64(lat.ValueAtQuantile(99))/1000, "p99-ms")
	b.ReportMetric(float64(errs)/float64(b.N), "errors/op")
	// Where the time goes, by the server's own counters (global: the
	// benchmark's server must be otherwise idle for them to mean anything).
	for _, c := range []struct{ name, unit string }{
		{"Questions", "stmts/op"},
		{"Com_commit", "commits/op"},
		{"Innodb_os_log_fsyncs", "fsyncs/op"},
		{"Innodb_row_lock_waits", "lock-waits/op"},
		{"Innodb_row_lock_time", "lock-ms/op"},
	} {
		b.ReportMetric(float64(after[c.name]-before[c.name])/float64(b.N), c.unit)
	}
	if bt, ok := o.(*Batched); ok {
		s := bt.Stats()
		if op == "decrement" {
			b.ReportMetric(float64(s.Requests)/float64(max(1, s.Batches)), "requests/batch")
		} else {
			b.ReportMetric(float64(s.OrderCalls)/float64(max(1, s.OrderBatches)), "orders/commit")
		}
	}
	if op != "decrement" {
		b.ReportMetric(ledgerBytes(b, db, table), "ledger-B/order")
	}
}

// serverStatus reads the server's global counters that ordersBench
// reports as deltas.
func serverStatus(b *testing.B, db *sqlx.DB) map[string]int64 {
	var rows []struct {
		Name  string `db:"Variable_name"`
		Value int64  `db:"Value"`
	}
	err := db.SelectContext(context.Background(), &rows, "SHOW GLOBAL STATUS WHERE Variable_name IN ('Questions', 'Com_commit', 'Innodb_os_log_fsyncs', 'Innodb_row_lock_waits', 'Innodb_row_lock_time')")
	if err != nil {
		b.Fatal(err)
	}
	m := make(map[string]int64, len(rows))
	for _, r := range rows {
		m[r.Name] = r.Value
	}
	return m
}

// ledgerBytes returns the bytes the ledger tables of table take per
// recorded order, by InnoDB's own count after ANALYZE TABLE.
func ledgerBytes(b *testing.B, db *sqlx.DB, table string) float64 {
	ctx := context.Background()
	var orders, bytes int64
	for _, t := range []string{OrdersTable(table), OrderLinesTable(table)} {
		if _, err := db.ExecContext(ctx, "ANALYZE TABLE "+quote(t)); err != nil {
			b.Fatal(err)
		}
		var n int64
		if err := db.GetContext(ctx, &n, "SELECT data_length + index_length FROM information_schema.TABLES WHERE table_schema = DATABASE() AND table_name = ?", t); err != nil {
			b.Fatal(err)
		}
		bytes += n
	}
	if err := db.GetContext(ctx, &orders, "SELECT COUNT(*) FROM "+quote(OrdersTable(table))); err != nil {
		b.Fatal(err)
	}
	return float64(bytes) / float64(max(1, orders))
}
