package mysqllock

import (
	"testing"

	"github.com/go-sql-driver/mysql"
	"github.com/jmoiron/sqlx"
	"github.com/stockguard/stockguard/internal/must"
	"github.com/stockguard/stockguard/stocktest"
)

// stringCheck builds a StringCheck over every strategy of the package on
// one table, through a pool with server-side prepared statements, one
// that escapes client-side and sends several statements at once, and one
// like it under sql_mode NO_BACKSLASH_ESCAPES (where a backslash is no
// escape and only a doubled quote is); and over the same strategies on a
// closed pool: a string they refuse with ErrInvalidRequest was refused
// before any I/O.
func stringCheck(f *testing.F) *stocktest.StringCheck {
	prepared := testDB(f)
	escaped := testDB(f, multi)
	noBackslash := testDB(f, multi, func(c *mysql.Config) {
		if c.Params == nil {
			c.Params = map[string]string{}
		}
		c.Params["sql_mode"] = "'NO_BACKSLASH_ESCAPES'"
	})
	table := newTable(f, prepared)
	closed := testDB(f)
	closed.Close()
	c := &stocktest.StringCheck{}
	for _, db := range []*sqlx.DB{prepared, escaped, noBackslash} {
		for _, name := range strategyNames {
			c.Inventories = append(c.Inventories, strategies(db, WithTable(table))[name])
		}
		c.Inventories = append(c.Inventories, must.New(NewSegmented(db, WithTable(table))))
		for _, name := range orderStrategyNames {
			o := orderStrategies(db, WithTable(table))[name]
			c.Inventories = append(c.Inventories, o)
			c.Orders = append(c.Orders, o)
		}
	}
	for _, name := range strategyNames {
		c.Offline = append(c.Offline, strategies(closed, WithTable(table))[name])
	}
	for _, name := range orderStrategyNames {
		c.Offline = append(c.Offline, orderStrategies(closed, WithTable(table))[name])
	}
	c.Offline = append(c.Offline, must.New(NewSegmented(closed, WithTable(table))))
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
