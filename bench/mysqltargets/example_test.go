package mysqltargets_test

import (
	"github.com/jmoiron/sqlx"

	"github.com/stockguard/stockguard"
	"github.com/stockguard/stockguard/bench"
	"github.com/stockguard/stockguard/bench/mysqltargets"
	"github.com/stockguard/stockguard/mysqllock"
)

// A new strategy on MySQL is its file plus one Register call (in
// register.go, from an init function): stockbench, its -h, the harness's
// tests and benchmarks pick it up by name. Here mysqllock.NewAtomic stands
// in for the new strategy's constructor.
func ExampleTarget() {
	bench.Register(mysqltargets.Target("mysql-mine", "what it does, in a line",
		func(db *sqlx.DB, table string) (stockguard.Inventory, error) {
			return mysqllock.NewAtomic(db, mysqllock.WithTable(table))
		}))
}
