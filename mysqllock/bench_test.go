package mysqllock

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/stockguard/stockguard"
)

// BenchmarkHotSKU runs every strategy on one hot SKU that never sells out,
// at 1, 16 and 64 concurrent buyers, over a pool with interpolateParams=true.
// b.N is the number of Decrement calls; decrements/s counts the successful
// ones, retries/op the strategy's internal retries per call, errors/op the
// calls that failed (ErrContention when retries run out).
//
//	go test -run '^$' -bench BenchmarkHotSKU -benchtime 3s ./mysqllock/
func BenchmarkHotSKU(b *testing.B) {
	db := testDB(b, interpolate)
	table := newTable(b, db)
	for _, name := range strategyNames {
		for _, workers := range []int{1, 16, 64} {
			b.Run(fmt.Sprintf("strategy=%s/workers=%d", name, workers), func(b *testing.B) {
				hotSKU(b, strategies(db, WithTable(table))[name], fmt.Sprintf("hot-%s-%d", name, workers), workers)
			})
		}
	}
}

// BenchmarkAtomicDSN measures what interpolateParams=true is worth: without
// it the driver prepares and closes a server-side statement per call.
//
//	go test -run '^$' -bench BenchmarkAtomicDSN -benchtime 3s ./mysqllock/
func BenchmarkAtomicDSN(b *testing.B) {
	for _, ip := range []bool{false, true} {
		db := testDB(b, func(c *mysql.Config) { c.InterpolateParams = ip })
		table := newTable(b, db)
		for _, workers := range []int{1, 16} {
			b.Run(fmt.Sprintf("interpolateParams=%t/workers=%d", ip, workers), func(b *testing.B) {
				hotSKU(b, NewAtomic(db, WithTable(table)), fmt.Sprintf("hot-%t-%d", ip, workers), workers)
			})
		}
	}
}

// hotSKU lets workers goroutines share b.N decrements of one unit of sku,
// then checks that the stock went down by exactly the units acknowledged.
func hotSKU(b *testing.B, inv stockguard.Inventory, sku string, workers int) {
	ctx := context.Background()
	if err := inv.SetStock(ctx, sku, stockguard.MaxQty); err != nil {
		b.Fatal(err)
	}
	var retries0 int64
	rc, _ := inv.(stockguard.RetryCounter)
	if rc != nil {
		retries0 = rc.Retries()
	}
	var next, failed atomic.Int64
	var firstErr atomic.Value
	var wg sync.WaitGroup
	b.ResetTimer()
	began := time.Now()
	for range workers {
		wg.Go(func() {
			for next.Add(1) <= int64(b.N) {
				if err := inv.Decrement(ctx, sku, 1); err != nil {
					failed.Add(1)
					firstErr.CompareAndSwap(nil, err)
				}
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(began)
	b.StopTimer()
	ok := int64(b.N) - failed.Load()
	left, err := inv.Stock(ctx, sku)
	if err != nil {
		b.Fatal(err)
	}
	if gone := stockguard.MaxQty - left; gone != ok {
		b.Fatalf("%d units gone, %d acknowledged", gone, ok)
	}
	if err, _ := firstErr.Load().(error); err != nil && !stockguard.IsContract(err) {
		b.Fatalf("non-contract error: %v", err)
	}
	b.ReportMetric(float64(ok)/elapsed.Seconds(), "decrements/s")
	b.ReportMetric(float64(failed.Load())/float64(b.N), "errors/op")
	if rc != nil {
		b.ReportMetric(float64(rc.Retries()-retries0)/float64(b.N), "retries/op")
	}
}
