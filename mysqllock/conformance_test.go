package mysqllock

import (
	"testing"

	"github.com/go-sql-driver/mysql"
	"github.com/stockguard/stockguard"
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
				return NewPessimistic(db, WithTable(table), WithLockMode(m))
			})
		})
	}
}
