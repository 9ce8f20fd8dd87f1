package pglock

import (
	"sync"
	"testing"
	"time"

	"github.com/stockguard/stockguard"
)

// CreateSchema over a stock table made before on_orders existed adds the
// column and fills it with the units of the ledger's open orders, so that
// Restock's room check counts them, also when several run at once;
// before the upgrade, orders on the table are unavailable and change
// nothing.
func TestCreateSchema_addsOnOrders(t *testing.T) {
	db := testDB(t)
	table := newTable(t, db)
	ctx := t.Context()
	a, err := NewAtomic(db, WithTable(table))
	if err != nil {
		t.Fatal(err)
	}
	if err := a.SetStock(ctx, "x", 10); err != nil {
		t.Fatal(err)
	}
	want(t, "Take", a.Take(ctx, "t", line("x", 3)), nil)
	want(t, "Hold", a.Hold(ctx, "h", stockguard.MaxHoldTTL, line("x", 2)), nil)
	want(t, "Take r", a.Take(ctx, "r", line("x", 1)), nil)
	want(t, "Return", a.Return(ctx, "r"), nil)
	if _, err := db.ExecContext(ctx, "ALTER TABLE "+quote(table)+" DROP COLUMN on_orders"); err != nil {
		t.Fatal(err)
	}
	b, err := NewBatched(db, WithTable(table))
	if err != nil {
		t.Fatal(err)
	}
	for name, o := range map[string]stockguard.Orders{"atomic": a, "batched": b} {
		want(t, name+" Take before the upgrade", o.Take(ctx, "u-"+name, line("x", 1)), stockguard.ErrUnavailable)
		want(t, name+" Restock before the upgrade", o.Restock(ctx, "rs-"+name, "x", 1), stockguard.ErrUnavailable)
		want(t, name+" Return before the upgrade", o.Return(ctx, "t"), stockguard.ErrUnavailable)
	}
	if got := stockOf(t, a, "x"); got != 5 {
		t.Fatalf("x: %d left, want 5", got)
	}
	// Several at once, as several processes starting: a reader holds the
	// table until every one has found no column and waits for its ALTER;
	// then one adds the column and the others' ALTERs fail and are undone.
	reader, err := db.BeginTxx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer reader.Rollback()
	if _, err := reader.ExecContext(ctx, "SELECT 1 FROM "+quote(table)+" LIMIT 1"); err != nil {
		t.Fatal(err)
	}
	const upgraders = 4
	var wg sync.WaitGroup
	for range upgraders {
		wg.Go(func() {
			if err := CreateSchema(ctx, db, WithTable(table)); err != nil {
				t.Error(err)
			}
		})
	}
	for waiting, began := 0, time.Now(); waiting < upgraders; {
		if time.Since(began) > 30*time.Second {
			t.Fatalf("%d of %d upgraders wait for the table after 30s", waiting, upgraders)
		}
		if err := db.GetContext(ctx, &waiting, "SELECT count(*) FROM pg_locks WHERE relation = to_regclass($1) AND NOT granted", quote(table)); err != nil {
			t.Fatal(err)
		}
		time.Sleep(10 * time.Millisecond)
	}
	reader.Rollback()
	wg.Wait()
	if err := CreateSchema(ctx, db, WithTable(table)); err != nil {
		t.Fatal("again:", err)
	}
	var out int64
	if err := db.GetContext(ctx, &out, "SELECT on_orders FROM "+quote(table)+" WHERE sku = 'x'"); err != nil {
		t.Fatal(err)
	}
	if out != 5 {
		t.Fatalf("on_orders = %d, want 5 (3 taken, 2 held)", out)
	}
	// 5 left, 5 out: room for MaxQty-10 more, not one unit beyond.
	want(t, "Restock past MaxQty", a.Restock(ctx, "big", "x", stockguard.MaxQty-9), stockguard.ErrInvalidRequest)
	want(t, "Restock to MaxQty", a.Restock(ctx, "fits", "x", stockguard.MaxQty-10), nil)
	want(t, "SetStock past MaxQty", a.SetStock(ctx, "x", stockguard.MaxQty-4), stockguard.ErrInvalidRequest)
	onOrdersMatchLedger(t, db, table)
}
