package mysqllock

import (
	"testing"

	"github.com/go-sql-driver/mysql"
	"github.com/stockguard/stockguard"
	"github.com/stockguard/stockguard/stocktest"
)

// The adversarial checker over the Orders strategies sharing one table:
// callers that give up and repeat on another instance, with every order
// call interleaved. Each row is one pool setting that changes how orders
// are written (statement by statement, or batches in one multi-statement
// round trip).
func TestOrders_adversary(t *testing.T) {
	pools := []struct {
		name string
		edit func(*mysql.Config)
	}{
		{"interpolateParams", interpolate},
		{"multiStatements", multi},
	}
	for _, p := range pools {
		t.Run(p.name, func(t *testing.T) {
			db := testDB(t, p.edit)
			db.SetMaxOpenConns(32)
			for _, mix := range []struct {
				name  string
				insts func(table string) []stockguard.Orders
			}{
				{"atomic", func(table string) []stockguard.Orders {
					return []stockguard.Orders{NewAtomic(db, WithTable(table)), NewAtomic(db, WithTable(table))}
				}},
				{"atomic+batched+lanes", func(table string) []stockguard.Orders {
					return []stockguard.Orders{
						NewAtomic(db, WithTable(table)),
						NewBatched(db, WithTable(table)),
						NewBatched(db, WithTable(table), WithOrderLanes(4)),
					}
				}},
			} {
				t.Run(mix.name, func(t *testing.T) {
					stocktest.Adversary{}.RunOrders(t, mix.insts(newTable(t, db)))
				})
			}
		})
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
	insts = append(insts, NewBatched(db, WithTable(table)))
	stocktest.Adversary{}.RunInventory(t, insts)
}
