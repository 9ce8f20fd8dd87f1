package mysqllock

import (
	"context"
	"fmt"
	"slices"
	"testing"

	"github.com/go-sql-driver/mysql"
	"github.com/jmoiron/sqlx"
	"github.com/stockguard/stockguard"
	"github.com/stockguard/stockguard/internal/backends/backendstest"
	"github.com/stockguard/stockguard/internal/must"
)

// BenchmarkHotSKU runs every strategy on one hot SKU that never sells out,
// at 1, 16 and 64 concurrent buyers, over a pool with interpolateParams=true,
// and next to them strategy=driver, the floor under them (see driverOnly).
// b.N is the number of Decrement calls; decrements/s counts the successful
// ones, retries/op the strategy's internal retries per call, errors/op the
// calls that failed (ErrContention when retries run out); see hotRow for
// the latency metrics.
//
//	go test -run '^$' -bench BenchmarkHotSKU -benchtime 3s ./mysqllock/
func BenchmarkHotSKU(b *testing.B) {
	db := testDB(b, interpolate)
	table := newTable(b, db)
	invs := strategies(db, WithTable(table))
	invs["driver"] = newDriverOnly(db, table)
	for _, name := range append(slices.Clip(strategyNames), "driver") {
		for _, workers := range []int{1, 16, 64} {
			b.Run(fmt.Sprintf("strategy=%s/workers=%d", name, workers), func(b *testing.B) {
				hotRow(b, backendstest.SharedMySQL(b).Proc, invs[name], fmt.Sprintf("hot-%s-%d", name, workers), workers)
			})
		}
	}
}

// driverOnly is the floor under the package's strategies: Atomic's UPDATE
// sent straight through database/sql — no connection pinned, no
// supervision, no error classification, no read explaining a refusal. Next
// to Atomic it shows what the package adds to a decrement; next to
// sysbench running the same statement (testdata/compare-sysbench.sh), what
// the Go driver and runtime cost against a C client.
type driverOnly struct {
	*Atomic // its pool and statement; SetStock and Stock
}

func newDriverOnly(db *sqlx.DB, table string) driverOnly {
	return driverOnly{must.New(NewAtomic(db, WithTable(table)))}
}

func (d driverOnly) Decrement(ctx context.Context, sku string, qty int64) error {
	res, err := d.db.ExecContext(ctx, d.q.take, qty, sku, qty)
	if err != nil {
		return err
	}
	if n, err := res.RowsAffected(); err != nil || n != 1 {
		return fmt.Errorf("%w: %d rows changed (%v)", stockguard.ErrInsufficientStock, n, err)
	}
	return nil
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
				hotRow(b, backendstest.SharedMySQL(b).Proc, must.New(NewAtomic(db, WithTable(table))), fmt.Sprintf("hot-%t-%d", ip, workers), workers)
			})
		}
	}
}
