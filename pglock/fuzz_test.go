package pglock

import (
	"testing"

	"github.com/stockguard/stockguard/internal/must"
	"github.com/stockguard/stockguard/stocktest"
)

// stringCheck builds a StringCheck over every strategy of the package on
// one table, and over the same strategies on a closed pool: a string
// they refuse with ErrInvalidRequest was refused before any I/O.
func stringCheck(f *testing.F) *stocktest.StringCheck {
	db := testDB(f)
	table := newTable(f, db)
	closed := testDB(f)
	closed.Close()
	c := &stocktest.StringCheck{}
	for _, name := range strategyNames {
		c.Inventories = append(c.Inventories, strategies(db, WithTable(table))[name])
		c.Offline = append(c.Offline, strategies(closed, WithTable(table))[name])
	}
	c.Inventories = append(c.Inventories, must.New(NewSegmented(db, WithTable(table))))
	c.Offline = append(c.Offline, must.New(NewSegmented(closed, WithTable(table))))
	for _, name := range orderStrategyNames {
		o := orderStrategies(db, WithTable(table))[name]
		c.Inventories = append(c.Inventories, o)
		c.Orders = append(c.Orders, o)
		c.Offline = append(c.Offline, orderStrategies(closed, WithTable(table))[name])
	}
	if err := c.Prepare(f.Context()); err != nil {
		f.Fatal(err)
	}
	return c
}

// FuzzSKU sends a SKU string through every statement that carries one.
func FuzzSKU(f *testing.F) {
	c := stringCheck(f)
	f.Fuzz(func(t *testing.T, sku string) {
		for _, v := range c.SKU(t.Context(), sku) {
			t.Error(v)
		}
	})
}

// FuzzOrderID sends an order ID string through every order statement.
func FuzzOrderID(f *testing.F) {
	c := stringCheck(f)
	f.Fuzz(func(t *testing.T, id string) {
		for _, v := range c.OrderID(t.Context(), id) {
			t.Error(v)
		}
	})
}
