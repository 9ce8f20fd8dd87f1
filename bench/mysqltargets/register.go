package mysqltargets

import (
	"sync"

	"github.com/jmoiron/sqlx"

	"github.com/stockguard/stockguard"
	"github.com/stockguard/stockguard/bench"
	"github.com/stockguard/stockguard/internal/counterexample"
	"github.com/stockguard/stockguard/mysqllock"
)

// The targets on MySQL, in the order reports show them. Each builds one
// app instance, with the package's default options, on the run's private
// table. A new strategy on MySQL is one more Register call here.
func init() {
	bench.RegisterBackend(Backend)

	bench.Register(bench.OrdersTarget(Target("mysql-atomic", "one conditional UPDATE qty = qty - n WHERE qty >= n",
		func(db *sqlx.DB, table string) (stockguard.Inventory, error) {
			return mysqllock.NewAtomic(db, mysqllock.WithTable(table))
		})))
	bench.Register(Target("mysql-pessimistic", "transaction: SELECT … FOR UPDATE, check, UPDATE, COMMIT",
		func(db *sqlx.DB, table string) (stockguard.Inventory, error) {
			return mysqllock.NewPessimistic(db, mysqllock.WithTable(table))
		}))
	bench.Register(Target("mysql-optimistic", "read qty+version, UPDATE … WHERE version = ?, retry on conflict",
		func(db *sqlx.DB, table string) (stockguard.Inventory, error) {
			return mysqllock.NewOptimistic(db, mysqllock.WithTable(table))
		}))
	bench.Register(Target("mysql-namedlock", "GET_LOCK, read, check, write, RELEASE_LOCK on a pinned connection",
		func(db *sqlx.DB, table string) (stockguard.Inventory, error) {
			return mysqllock.NewNamedLock(db, mysqllock.WithTable(table))
		}))
	bench.Register(SegmentedTarget("mysql-segmented", "stock split over 8 rows; conditional UPDATE of a random one, locked fallback across them",
		func(db *sqlx.DB, table string) (stockguard.Inventory, error) {
			return mysqllock.NewSegmented(db, mysqllock.WithTable(table))
		}))
	bench.Register(bench.OrdersTarget(Target("mysql-batched", "concurrent requests for a SKU combined into one UPDATE (client-side group commit)",
		func(db *sqlx.DB, table string) (stockguard.Inventory, error) {
			return mysqllock.NewBatched(db, mysqllock.WithTable(table))
		})))

	// Known-broken patterns (package internal/counterexample says how each
	// breaks): they run only when asked for, and every report labels them.
	// Each forces its race, so that every run catches it.
	bench.Register(broken(Target("broken-local-mutex", "in-process mutex around SELECT/UPDATE: one lock per app instance",
		func(db *sqlx.DB, table string) (stockguard.Inventory, error) {
			c, err := counterexample.NewLocalMutex(db, table)
			if err != nil {
				return nil, err
			}
			c.ForceOverlap()
			return c, nil
		})))
	bench.Register(broken(Target("broken-mysql-repeatable-read", "REPEATABLE READ transaction: snapshot SELECT, UPDATE to the computed level",
		func(db *sqlx.DB, table string) (stockguard.Inventory, error) {
			c, err := counterexample.NewRepeatableRead(db, table)
			if err != nil {
				return nil, err
			}
			c.ForceOverlap()
			return c, nil
		})))

	// Broken checkout clients over mysqllock.NewAtomic's sound Orders: they
	// run only under the checkout workload.
	bench.Register(checkout(Target("broken-checkout-retry-no-id", "a lost reply (1 in 10) retried as a fresh order under a new ID: taken twice",
		func(db *sqlx.DB, table string) (stockguard.Inventory, error) {
			a, err := mysqllock.NewAtomic(db, mysqllock.WithTable(table))
			if err != nil {
				return nil, err
			}
			return counterexample.NewRetryWithoutID(a, 0), nil
		})))
	bench.Register(checkout(Target("broken-checkout-line-by-line", "a cart taken one line at a time, no undo when a later line is short",
		func(db *sqlx.DB, table string) (stockguard.Inventory, error) {
			a, err := mysqllock.NewAtomic(db, mysqllock.WithTable(table))
			if err != nil {
				return nil, err
			}
			return counterexample.NewLineByLine(a), nil
		})))
	var books sync.Map // table → the instances' shared *counterexample.HoldBook
	bench.Register(checkout(Target("broken-checkout-client-timer", "a hold as a take plus a client-side timer; 1 in 5 timers die with the client",
		func(db *sqlx.DB, table string) (stockguard.Inventory, error) {
			book, _ := books.LoadOrStore(table, counterexample.NewHoldBook())
			a, err := mysqllock.NewAtomic(db, mysqllock.WithTable(table))
			if err != nil {
				return nil, err
			}
			return counterexample.NewClientTimer(a, book.(*counterexample.HoldBook), 0), nil
		})))
}

// checkout marks a broken checkout client.
func checkout(t bench.Target) bench.Target {
	t.OrdersOnly = true
	return broken(bench.OrdersTarget(t))
}

func broken(t bench.Target) bench.Target {
	t.Counterexample = true
	return t
}
