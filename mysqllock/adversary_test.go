package mysqllock

import (
	"testing"

	"github.com/go-sql-driver/mysql"
	"github.com/jmoiron/sqlx"
	"github.com/stockguard/stockguard"
	"github.com/stockguard/stockguard/internal/backends/backendstest"
	"github.com/stockguard/stockguard/internal/must"
	"github.com/stockguard/stockguard/internal/netgate"
	"github.com/stockguard/stockguard/stocktest"
)

// The adversarial checker over the Orders strategies sharing one table:
// callers that give up and repeat on another instance, with every order
// call interleaved. Atomic alone, and Atomic beside Batched and Batched
// with lanes, on each pool kind that changes how orders are written
// (statement by statement, or batches in one multi-statement round trip).
func TestOrders_adversary(t *testing.T) {
	rows := []struct {
		name  string
		edit  func(*mysql.Config)
		insts func(db *sqlx.DB, table string) []stockguard.Orders
	}{
		{"interpolateParams/atomic", interpolate, func(db *sqlx.DB, table string) []stockguard.Orders {
			return []stockguard.Orders{must.New(NewAtomic(db, WithTable(table))), must.New(NewAtomic(db, WithTable(table)))}
		}},
		{"interpolateParams/atomic+batched+lanes", interpolate, mixed},
		{"multiStatements/atomic+batched+lanes", multi, mixed},
	}
	for _, r := range rows {
		t.Run(r.name, func(t *testing.T) {
			db := testDB(t, r.edit)
			db.SetMaxOpenConns(32)
			stocktest.Adversary{}.RunOrders(t, r.insts(db, newTable(t, db)))
		})
	}
}

// mixed is Atomic, Batched and Batched with four lanes on table.
func mixed(db *sqlx.DB, table string) []stockguard.Orders {
	return []stockguard.Orders{
		must.New(NewAtomic(db, WithTable(table))),
		must.New(NewBatched(db, WithTable(table))),
		must.New(NewBatched(db, WithTable(table), WithOrderLanes(4))),
	}
}

// The Inventory workload over every strategy of the package on one table.
func TestInventory_adversary(t *testing.T) {
	db := testDB(t, interpolate)
	db.SetMaxOpenConns(32)
	table := newTable(t, db)
	var insts []stockguard.Inventory
	for _, name := range strategyNames {
		insts = append(insts, strategies(db, WithTable(table))[name])
	}
	insts = append(insts, must.New(NewBatched(db, WithTable(table))))
	stocktest.Adversary{}.RunInventory(t, insts)
}

// The adversarial checker on TiDB (run when STOCKGUARD_TIDB=1): Atomic
// beside Batched and Batched with lanes on one table.
func TestTiDB_adversary(t *testing.T) {
	db := tidbDB(t)
	stocktest.Adversary{}.RunOrders(t, mixed(db, newTable(t, db)))
}

// The adversarial checker with the pool's connections behind a network
// that holds a share of the requests past their callers' deadlines and
// delivers them later, after the repeats: Atomic beside Batched and
// Batched with lanes, on both pool kinds.
func TestOrders_adversaryLateNetwork(t *testing.T) {
	for _, p := range []struct {
		name string
		edit func(*mysql.Config)
	}{{"interpolateParams", interpolate}, {"multiStatements", multi}} {
		t.Run(p.name, func(t *testing.T) {
			l := netgate.Adversarial(t)
			db := testDB(t, p.edit, backendstest.LateMySQL(t, l))
			db.SetMaxOpenConns(32)
			stocktest.Adversary{Seed: l.Seed(), Late: l.Max()}.RunOrders(t, mixed(db, newTable(t, testDB(t, p.edit))))
			l.Check(t)
		})
	}
}

// The Inventory workload over every strategy of the package through the
// late network.
func TestInventory_adversaryLateNetwork(t *testing.T) {
	l := netgate.Adversarial(t)
	db := testDB(t, interpolate, backendstest.LateMySQL(t, l))
	db.SetMaxOpenConns(32)
	table := newTable(t, testDB(t, interpolate))
	var insts []stockguard.Inventory
	for _, name := range strategyNames {
		insts = append(insts, strategies(db, WithTable(table))[name])
	}
	insts = append(insts, must.New(NewBatched(db, WithTable(table))))
	stocktest.Adversary{Seed: l.Seed(), Late: l.Max()}.RunInventory(t, insts)
	l.Check(t)
}

// The late-network Orders run on TiDB (run when STOCKGUARD_TIDB=1).
func TestTiDB_adversaryLateNetwork(t *testing.T) {
	table := newTable(t, tidbDB(t)) // skips unless TiDB runs
	l := netgate.Adversarial(t)
	db := backendstest.TiDB(t, interpolate, backendstest.LateMySQL(t, l))
	db.SetMaxOpenConns(64)
	stocktest.Adversary{Seed: l.Seed(), Late: l.Max()}.RunOrders(t, mixed(db, table))
	l.Check(t)
}
