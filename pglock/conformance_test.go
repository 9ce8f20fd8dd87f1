package pglock

import (
	"context"
	"os"
	"testing"

	"github.com/jmoiron/sqlx"
	"github.com/stockguard/stockguard"
	"github.com/stockguard/stockguard/internal/must"
	"github.com/stockguard/stockguard/stocktest"
)

// strategies builds every Inventory strategy of the package on one table.
func strategies(db *sqlx.DB, opts ...Option) map[string]stockguard.Inventory {
	return map[string]stockguard.Inventory{
		"atomic":       must.New(NewAtomic(db, opts...)),
		"pessimistic":  must.New(NewPessimistic(db, opts...)),
		"optimistic":   must.New(NewOptimistic(db, opts...)),
		"serializable": must.New(NewSerializable(db, opts...)),
		"advisory":     must.New(NewAdvisoryLock(db, opts...)),
		"batched":      must.New(NewBatched(db, opts...)),
	}
}

// strategyNames lists strategies: NewSegmented keeps its stock in a table
// of its own, so it has a conformance test of its own.
var strategyNames = []string{"atomic", "pessimistic", "optimistic", "serializable", "advisory", "batched"}

func TestSegmented_conformance(t *testing.T) {
	db := testDB(t)
	table := newTable(t, db)
	stocktest.Run(t, func(*testing.T) stockguard.Inventory {
		return must.New(NewSegmented(db, WithTable(table), WithSegments(4)))
	})
}

// EnvFull, set to "full", runs every strategy through the conformance
// suite, mixed strategies and every lock mode; plain go test runs the two
// strategies with the most code of their own (atomic's ledger path,
// batched) and segmented, to keep go test -race ./pglock/ near a minute
// and a half. CI runs the full set once (.ci/run).
const EnvFull = "STOCKGUARD_PGLOCK"

func full() bool { return os.Getenv(EnvFull) == "full" }

// skipUnlessFull skips t unless STOCKGUARD_PGLOCK=full.
func skipUnlessFull(t *testing.T) {
	t.Helper()
	if !full() {
		t.Skipf("set %s=full to run it", EnvFull)
	}
}

func TestConformance(t *testing.T) {
	db := testDB(t)
	names := []string{"atomic", "batched"}
	if full() {
		names = strategyNames
	}
	for _, name := range names {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			table := newTable(t, db)
			stocktest.Run(t, func(*testing.T) stockguard.Inventory {
				return strategies(db, WithTable(table))[name]
			})
		})
	}
}

// Every strategy bumps the version and guards its write, so instances of
// different strategies can share a table: here all of them drain one SKU.
func TestConformance_mixedStrategies(t *testing.T) {
	skipUnlessFull(t)
	db := testDB(t)
	table := newTable(t, db)
	var i int
	stocktest.Run(t, func(*testing.T) stockguard.Inventory {
		i++
		return strategies(db, WithTable(table))[strategyNames[i%len(strategyNames)]]
	})
}

func TestPessimistic_conformance_lockModes(t *testing.T) {
	skipUnlessFull(t)
	db := testDB(t)
	for _, m := range []LockMode{LockNoWait, LockSkipLocked} {
		t.Run(m.String(), func(t *testing.T) {
			t.Parallel()
			table := newTable(t, db)
			stocktest.Run(t, func(*testing.T) stockguard.Inventory {
				return must.New(NewPessimistic(db, WithTable(table), WithLockMode(m)))
			})
		})
	}
}

// orderStrategies builds every Orders strategy of the package on one table.
func orderStrategies(db *sqlx.DB, opts ...Option) map[string]stockguard.Orders {
	return map[string]stockguard.Orders{
		"atomic":  must.New(NewAtomic(db, opts...)),
		"batched": must.New(NewBatched(db, opts...)),
	}
}

var orderStrategyNames = []string{"atomic", "batched"}

func TestOrders_conformance(t *testing.T) {
	db := testDB(t)
	for _, name := range orderStrategyNames {
		t.Run(name, func(t *testing.T) {
			table := newTable(t, db)
			suite := stocktest.Suite{Footprint: footprint(db, table)}
			suite.RunOrders(t, func(*testing.T) stockguard.Orders {
				return orderStrategies(db, WithTable(table))[name]
			})
			onOrdersMatchLedger(t, db, table)
		})
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
