package pglock

import (
	"testing"
	"time"

	"github.com/stockguard/stockguard"
)

// PurgeOrders deletes closed records past the retention, reclaims expired
// holds, keeps held and recent orders, and takes a purged taken order's
// units off on_orders, which then matches the ledger again.
func TestPurgeOrders(t *testing.T) {
	db := testDB(t)
	table := newTable(t, db)
	ctx := t.Context()
	o, err := NewAtomic(db, WithTable(table))
	if err != nil {
		t.Fatal(err)
	}
	want(t, "SetStock", o.SetStock(ctx, "x", 100), nil)
	want(t, "Take", o.Take(ctx, "taken-old", line("x", 1)), nil)
	want(t, "Take", o.Take(ctx, "returned-old", line("x", 1)), nil)
	want(t, "Return", o.Return(ctx, "returned-old"), nil)
	want(t, "Restock", o.Restock(ctx, "restock-old", "x", 1), nil)
	want(t, "Hold", o.Hold(ctx, "held-old", time.Hour, line("x", 1)), nil)
	want(t, "Hold", o.Hold(ctx, "expiring", time.Hour, line("x", 2)), nil)
	want(t, "Take", o.Take(ctx, "taken-new", line("x", 1)), nil)
	// Age every record but taken-new by two days, and make expiring's
	// deadline pass (rather than wait for it).
	for _, q := range []string{
		"UPDATE " + quote(OrdersTable(table)) + " SET changed_at = changed_at - interval '2 days' WHERE id <> 'taken-new'",
		"UPDATE " + quote(OrdersTable(table)) + " SET deadline = deadline - interval '2 hours' WHERE id = 'expiring'",
		"UPDATE " + quote(OrderLinesTable(table)) + " SET expires = expires - interval '2 hours' WHERE order_id = 'expiring'",
	} {
		if _, err := db.ExecContext(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	n, err := PurgeOrders(ctx, db, WithTable(table), WithOrderRetention(24*time.Hour))
	if err != nil || n != 3 {
		t.Fatalf("PurgeOrders = %d, %v; want 3", n, err)
	}
	for id, wantRows := range map[string]int{"taken-old": 0, "returned-old": 0, "restock-old": 0, "held-old": 2, "expiring": 2, "taken-new": 2} {
		if got := ledgerRows(t, db, table, id); got != wantRows {
			t.Errorf("%s: %d ledger rows, want %d", id, got, wantRows)
		}
	}
	// The expired hold was reclaimed (and is recent now: kept): taken-old,
	// held-old and taken-new took 3 units, restock-old added 1.
	if got := stockOf(t, o, "x"); got != 100-3+1 {
		t.Errorf("x: %d, want %d", got, 100-3+1)
	}
	onOrdersMatchLedger(t, db, table)
	want(t, "Return purged", o.Return(ctx, "taken-old"), stockguard.ErrUnknownOrder)
	if info, err := o.Order(ctx, "held-old"); err != nil || info.State != stockguard.OrderHeld {
		t.Errorf("held-old: %+v, %v", info, err)
	}
	// A second run finds nothing more to delete.
	if n, err := PurgeOrders(ctx, db, WithTable(table), WithOrderRetention(24*time.Hour)); err != nil || n != 0 {
		t.Errorf("second PurgeOrders = %d, %v; want 0", n, err)
	}
}
