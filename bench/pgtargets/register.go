package pgtargets

import (
	"github.com/jmoiron/sqlx"

	"github.com/stockguard/stockguard"
	"github.com/stockguard/stockguard/bench"
	"github.com/stockguard/stockguard/pglock"
)

// The targets on PostgreSQL, in the order reports show them, each one app
// instance with the package's default options on the run's private table.
// pg-atomic and pg-batched stand for the backend in a default run; the
// others run on request (pg-*).
func init() {
	bench.RegisterBackend(Backend)

	bench.Register(bench.OrdersTarget(byDefault(Target("pg-atomic", "one UPDATE … SET qty = qty - n WHERE qty >= n RETURNING qty",
		func(db *sqlx.DB, table string) (stockguard.Inventory, error) {
			return pglock.NewAtomic(db, pglock.WithTable(table))
		}))))
	bench.Register(Target("pg-pessimistic", "transaction: SELECT … FOR UPDATE (lock_timeout), check, UPDATE, COMMIT",
		func(db *sqlx.DB, table string) (stockguard.Inventory, error) {
			return pglock.NewPessimistic(db, pglock.WithTable(table))
		}))
	bench.Register(Target("pg-optimistic", "read qty+version, UPDATE … WHERE version = $3, retry on conflict",
		func(db *sqlx.DB, table string) (stockguard.Inventory, error) {
			return pglock.NewOptimistic(db, pglock.WithTable(table))
		}))
	bench.Register(Target("pg-serializable", "SERIALIZABLE transaction: read, check, write; retry on 40001",
		func(db *sqlx.DB, table string) (stockguard.Inventory, error) {
			return pglock.NewSerializable(db, pglock.WithTable(table))
		}))
	bench.Register(Target("pg-advisory", "transaction: pg_advisory_xact_lock(hash(sku)), read, check, write, COMMIT",
		func(db *sqlx.DB, table string) (stockguard.Inventory, error) {
			return pglock.NewAdvisoryLock(db, pglock.WithTable(table))
		}))
	bench.Register(SegmentedTarget("pg-segmented", "stock split over 8 rows; UPDATE of the first free one (FOR UPDATE SKIP LOCKED), locked sweep otherwise",
		func(db *sqlx.DB, table string) (stockguard.Inventory, error) {
			return pglock.NewSegmented(db, pglock.WithTable(table))
		}))
	bench.Register(bench.OrdersTarget(byDefault(Target("pg-batched", "concurrent requests for a SKU combined into one UPDATE (client-side group commit)",
		func(db *sqlx.DB, table string) (stockguard.Inventory, error) {
			return pglock.NewBatched(db, pglock.WithTable(table))
		}))))
}

// byDefault puts t in a default run, when a server can be had; the other
// targets run on request.
func byDefault(t bench.Target) bench.Target {
	t.OnRequest = false
	t.IfReachable = true
	return t
}
