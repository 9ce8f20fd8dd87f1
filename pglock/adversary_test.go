package pglock

import (
	"testing"

	"github.com/stockguard/stockguard"
	"github.com/stockguard/stockguard/internal/backends/backendstest"
	"github.com/stockguard/stockguard/internal/must"
	"github.com/stockguard/stockguard/internal/netgate"
	"github.com/stockguard/stockguard/stocktest"
)

// The adversarial checker over the Orders strategies: Atomic alone, and
// Atomic beside two Batched instances on one table, with callers that
// give up and repeat on another instance.
func TestOrders_adversary(t *testing.T) {
	db := testDB(t)
	for _, mix := range []struct {
		name  string
		insts func(table string) []stockguard.Orders
	}{
		{"atomic", func(table string) []stockguard.Orders {
			return []stockguard.Orders{must.New(NewAtomic(db, WithTable(table))), must.New(NewAtomic(db, WithTable(table)))}
		}},
		{"atomic+batched", func(table string) []stockguard.Orders {
			return []stockguard.Orders{must.New(NewAtomic(db, WithTable(table))), must.New(NewBatched(db, WithTable(table))), must.New(NewBatched(db, WithTable(table)))}
		}},
	} {
		t.Run(mix.name, func(t *testing.T) {
			stocktest.Adversary{}.RunOrders(t, mix.insts(newTable(t, db)))
		})
	}
}

// The Inventory workload over every strategy of the package on one table.
func TestInventory_adversary(t *testing.T) {
	db := testDB(t)
	table := newTable(t, db)
	var insts []stockguard.Inventory
	for _, name := range strategyNames {
		insts = append(insts, strategies(db, WithTable(table))[name])
	}
	stocktest.Adversary{}.RunInventory(t, insts)
}

// The adversarial checker with the pool's connections behind a network
// that holds a share of the requests past their callers' deadlines and
// delivers them later, after the repeats: Atomic beside two Batched
// instances on one table.
func TestOrders_adversaryLateNetwork(t *testing.T) {
	l := netgate.Adversarial(t)
	db := backendstest.LatePostgres(t, l)
	table := newTable(t, testDB(t))
	stocktest.Adversary{Seed: l.Seed(), Late: l.Max()}.RunOrders(t, []stockguard.Orders{
		must.New(NewAtomic(db, WithTable(table))), must.New(NewBatched(db, WithTable(table))), must.New(NewBatched(db, WithTable(table))),
	})
	l.Check(t)
}

// The Inventory workload over every strategy of the package through the
// late network.
func TestInventory_adversaryLateNetwork(t *testing.T) {
	l := netgate.Adversarial(t)
	db := backendstest.LatePostgres(t, l)
	table := newTable(t, testDB(t))
	var insts []stockguard.Inventory
	for _, name := range strategyNames {
		insts = append(insts, strategies(db, WithTable(table))[name])
	}
	stocktest.Adversary{Seed: l.Seed(), Late: l.Max()}.RunInventory(t, insts)
	l.Check(t)
}
