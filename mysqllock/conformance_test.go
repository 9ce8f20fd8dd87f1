package mysqllock

import (
	"context"
	"testing"

	"github.com/go-sql-driver/mysql"
	"github.com/jmoiron/sqlx"
	"github.com/stockguard/stockguard"
	"github.com/stockguard/stockguard/internal/must"
	"github.com/stockguard/stockguard/stocktest"
)

func TestConformance(t *testing.T) {
	dsns := []struct {
		name string
		edit func(*mysql.Config)
	}{
		{"default", func(*mysql.Config) {}},
		{"interpolateParams", interpolate},
		// clientFoundRows changes what "rows affected" counts.
		{"clientFoundRows", func(c *mysql.Config) { c.ClientFoundRows = true }},
	}
	for _, d := range dsns {
		db := testDB(t, d.edit)
		for _, name := range strategyNames {
			t.Run(d.name+"/"+name, func(t *testing.T) {
				table := newTable(t, db)
				stocktest.Run(t, func(*testing.T) stockguard.Inventory {
					return strategies(db, WithTable(table))[name]
				})
			})
		}
	}
}

// Every strategy bumps the version and guards its write, so instances of
// different strategies can share a table: here all four drain one SKU.
func TestConformance_mixedStrategies(t *testing.T) {
	db := testDB(t, interpolate)
	table := newTable(t, db)
	var i int
	stocktest.Run(t, func(*testing.T) stockguard.Inventory {
		i++
		return strategies(db, WithTable(table))[strategyNames[i%len(strategyNames)]]
	})
}

func TestPessimistic_conformance_lockModes(t *testing.T) {
	db := testDB(t, interpolate)
	for _, m := range []LockMode{LockNoWait, LockSkipLocked} {
		t.Run(m.String(), func(t *testing.T) {
			table := newTable(t, db)
			stocktest.Run(t, func(*testing.T) stockguard.Inventory {
				return must.New(NewPessimistic(db, WithTable(table), WithLockMode(m)))
			})
		})
	}
}

// The Orders conformance suite, for both strategies that implement it,
// over the DSN variants that change what the driver reports.
func TestOrders_conformance(t *testing.T) {
	dsns := []struct {
		name string
		edit func(*mysql.Config)
	}{
		{"default", func(*mysql.Config) {}},
		{"interpolateParams", interpolate},
		{"clientFoundRows", func(c *mysql.Config) { c.ClientFoundRows = true }},
		{"multiStatements", multi},
	}
	for _, d := range dsns {
		db := testDB(t, d.edit)
		db.SetMaxOpenConns(48) // the shared server's connections are for every package's tests
		for _, name := range orderStrategyNames {
			t.Run(d.name+"/"+name, func(t *testing.T) {
				table := newTable(t, db)
				suite := stocktest.Suite{Footprint: footprint(db, table)}
				suite.RunOrders(t, func(*testing.T) stockguard.Orders {
					return orderStrategies(db, WithTable(table))[name]
				})
			})
		}
	}
}

// footprint counts the rows of every table of table, for Suite.Footprint.
func footprint(db *sqlx.DB, table string) func(ctx context.Context) (int64, error) {
	return func(ctx context.Context) (int64, error) {
		var total int64
		for _, name := range Tables(table) {
			var n int64
			if err := db.GetContext(ctx, &n, "SELECT COUNT(*) FROM "+quote(name)); err != nil {
				return 0, err
			}
			total += n
		}
		return total, nil
	}
}
