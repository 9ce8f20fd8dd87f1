package mysqllock

import (
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/stockguard/stockguard"
)

// The one-round-trip paths refuse an order that does not fit by failing
// rowCheck before COMMIT: a check that only warned in some sql_mode would
// commit the order's record without its units.
func TestOrders_rowCheckFailsWhateverSQLMode(t *testing.T) {
	for _, mode := range []string{"", "NO_UNSIGNED_SUBTRACTION", "ANSI"} {
		t.Run("sql_mode="+mode, func(t *testing.T) {
			db := testDB(t, multi, func(c *mysql.Config) {
				c.Params = map[string]string{"sql_mode": "'" + mode + "'"}
			})
			for _, name := range orderStrategyNames {
				t.Run(name, func(t *testing.T) {
					ctx := t.Context()
					table := newTable(t, db)
					o := orderStrategies(db, WithTable(table))[name]
					if err := o.SetStock(ctx, "a", 1); err != nil {
						t.Fatal(err)
					}
					want(t, "Take short", o.Take(ctx, "t1", line("a", 2)), stockguard.ErrInsufficientStock)
					want(t, "Hold short", o.Hold(ctx, "h1", stockguard.MaxHoldTTL, line("a", 2)), stockguard.ErrInsufficientStock)
					want(t, "Take unknown SKU", o.Take(ctx, "t2", line("zz", 1)), stockguard.ErrUnknownSKU)
					for _, id := range []string{"t1", "h1", "t2"} {
						if n := ledgerRows(t, db, table, id); n != 0 {
							t.Fatalf("refused order %s left %d ledger rows", id, n)
						}
					}
					want(t, "Hold", o.Hold(ctx, "h2", stockguard.MaxHoldTTL, line("a", 1)), nil)
					want(t, "Return", o.Return(ctx, "h2"), nil)
					wantLevels(t, o, map[string]int64{"a": 1})
				})
			}
		})
	}
}

// A hold's lines expire exactly at its deadline: the expired-hold readers
// find a hold by its lines' expires and decide by its deadline, so the two
// must be one value, on every path that writes a hold.
func TestOrders_holdLinesExpireAtTheDeadline(t *testing.T) {
	for _, pool := range []struct {
		name string
		edit func(*mysql.Config)
	}{{"statements", interpolate}, {"multiStatements", multi}} {
		t.Run(pool.name, func(t *testing.T) {
			db := testDB(t, pool.edit)
			for _, name := range orderStrategyNames {
				t.Run(name, func(t *testing.T) {
					ctx := t.Context()
					table := newTable(t, db)
					o := orderStrategies(db, WithTable(table))[name]
					for _, sku := range []string{"a", "b", "c"} {
						if err := o.SetStock(ctx, sku, 100); err != nil {
							t.Fatal(err)
						}
					}
					want(t, "Hold h1", o.Hold(ctx, "h1", stockguard.MaxHoldTTL, line("a", 1), line("b", 2), line("c", 3)), nil)
					want(t, "Hold h2", o.Hold(ctx, "h2", time.Minute, line("b", 1)), nil)
					want(t, "Take t1", o.Take(ctx, "t1", line("a", 1)), nil)
					var lines, off int
					err := db.QueryRowContext(ctx, "SELECT COUNT(*), COALESCE(SUM(l.expires <> o.deadline OR l.expires IS NULL), 0) FROM "+
						quote(OrderLinesTable(table))+" l JOIN "+quote(OrdersTable(table))+" o ON o.id = l.order_id").Scan(&lines, &off)
					if err != nil {
						t.Fatal(err)
					}
					if lines != 4 || off != 0 {
						t.Fatalf("%d held line rows, %d of them not expiring at their order's deadline; want 4 and 0", lines, off)
					}
				})
			}
		})
	}
}
