package mysqllock

import (
	"fmt"
	"testing"

	"github.com/go-sql-driver/mysql"
)

// BenchmarkHotSKU runs every strategy on one hot SKU that never sells out,
// at 1, 16 and 64 concurrent buyers, over a pool with interpolateParams=true.
// b.N is the number of Decrement calls; decrements/s counts the successful
// ones, retries/op the strategy's internal retries per call, errors/op the
// calls that failed (ErrContention when retries run out); see hotRow for
// the latency metrics.
//
//	go test -run '^$' -bench BenchmarkHotSKU -benchtime 3s ./mysqllock/
func BenchmarkHotSKU(b *testing.B) {
	db := testDB(b, interpolate)
	table := newTable(b, db)
	for _, name := range strategyNames {
		for _, workers := range []int{1, 16, 64} {
			b.Run(fmt.Sprintf("strategy=%s/workers=%d", name, workers), func(b *testing.B) {
				hotRow(b, strategies(db, WithTable(table))[name], fmt.Sprintf("hot-%s-%d", name, workers), workers)
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
				hotRow(b, NewAtomic(db, WithTable(table)), fmt.Sprintf("hot-%t-%d", ip, workers), workers)
			})
		}
	}
}
