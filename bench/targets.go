package bench

import (
	"github.com/jmoiron/sqlx"

	"github.com/stockguard/stockguard"
	"github.com/stockguard/stockguard/mysqllock"
)

// registry lists the strategies, in the order reports show them. Each entry
// builds one app instance on the run's private table or key prefix. Add new
// strategies at the end.
var registry = []Target{
	MySQLTarget("mysql-atomic", "one conditional UPDATE qty = qty - n WHERE qty >= n",
		func(db *sqlx.DB, table string) (stockguard.Inventory, error) {
			return mysqllock.NewAtomic(db, mysqllock.WithTable(table)), nil
		}),
	MySQLTarget("mysql-pessimistic", "transaction: SELECT … FOR UPDATE, check, UPDATE, COMMIT",
		func(db *sqlx.DB, table string) (stockguard.Inventory, error) {
			return mysqllock.NewPessimistic(db, mysqllock.WithTable(table)), nil
		}),
}
