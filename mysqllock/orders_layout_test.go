package mysqllock

import (
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/stockguard/stockguard"
)

// lineRows counts the rows of the ledger's lines table for id.
func lineRows(t testing.TB, db *sqlx.DB, table, id string) int {
	t.Helper()
	var n int
	if err := db.Get(&n, "SELECT COUNT(*) FROM "+quote(OrderLinesTable(table))+" WHERE order_id = ?", id); err != nil {
		t.Fatal(err)
	}
	return n
}

// wantOrder fails t unless Order(id) reports state and lines.
func wantOrder(t testing.TB, o stockguard.Orders, id string, state stockguard.OrderState, lines ...stockguard.Line) {
	t.Helper()
	info, err := o.Order(t.Context(), id)
	if err != nil {
		t.Fatalf("Order(%q): %v", id, err)
	}
	if info.State != state || !slices.Equal(info.Lines, lines) {
		t.Fatalf("Order(%q) = %v %v, want %v %v", id, info.State, info.Lines, state, lines)
	}
}

func TestLineList_roundTrip(t *testing.T) {
	for _, lines := range [][]stockguard.Line{
		{line("x", 1)},
		{line("", 0)},
		{line("a,b:c", 3), line("\x00\xff", stockguard.MaxQty), line("é", 12)},
	} {
		b := appendLineList(nil, lines)
		got, err := parseLineList(b)
		if err != nil || !slices.Equal(got, lines) {
			t.Errorf("%q: %v, %v; want %v", b, got, err, lines)
		}
	}
	if got := string(appendLineList(nil, []stockguard.Line{line("ab", 3), line("c", 10)})); got != "6162:3,63:10" {
		t.Errorf("encoded %q", got)
	}
	for _, bad := range []string{"", "61", "zz:1", "61:x", "61:1,"} {
		if lines, err := parseLineList([]byte(bad)); err == nil {
			t.Errorf("%q parsed: %v", bad, lines)
		}
	}
	if lineListLen < len(appendLineList(nil, maxLines())) {
		t.Errorf("lineListLen %d < %d", lineListLen, len(appendLineList(nil, maxLines())))
	}
}

// maxLines is the longest order there is: MaxLines lines of the longest
// SKUs and the most units.
func maxLines() []stockguard.Line {
	lines := make([]stockguard.Line, stockguard.MaxLines)
	for i := range lines {
		sku := fmt.Sprintf("%02d", i) + string(make([]byte, stockguard.MaxSKULen-2))
		lines[i] = line(sku, stockguard.MaxQty)
	}
	return lines
}

// A Take's and a Restock's lines are in the order row: they write no line
// row, on every way an order is recorded (one order, a batch that fits, a
// batch the locking way); a Hold's lines are rows, for the held index.
// Every reader finds them all the same.
func TestOrders_takeWritesNoLineRow(t *testing.T) {
	bothPaths(t, func(t *testing.T, db *sqlx.DB) {
		for _, name := range orderStrategyNames {
			t.Run(name, func(t *testing.T) {
				table := newTable(t, db)
				ctx := t.Context()
				o := orderStrategies(db, WithTable(table))[name]
				odd := "a,b:cé" // bytes of the encoding's own
				stockAll(t, o, map[string]int64{"x": 100, "y": 100, odd: 100})
				want(t, "Take", o.Take(ctx, "t1", line("x", 1)), nil)
				want(t, "Take cart", o.Take(ctx, "t3", line(odd, 2), line("y", 3), line("x", 4)), nil)
				want(t, "Restock", o.Restock(ctx, "r", "y", 5), nil)
				want(t, "Hold", o.Hold(ctx, "h", time.Hour, line("x", 1), line(odd, 1)), nil)
				for id, n := range map[string]int{"t1": 0, "t3": 0, "r": 0, "h": 2} {
					if got := lineRows(t, db, table, id); got != n {
						t.Errorf("%s: %d line rows, want %d", id, got, n)
					}
				}
				wantOrder(t, o, "t3", stockguard.OrderTaken, line(odd, 2), line("x", 4), line("y", 3))
				want(t, "Take t3 again", o.Take(ctx, "t3", line("x", 4), line(odd, 2), line("y", 3)), nil)
				want(t, "Take t3 other", o.Take(ctx, "t3", line("x", 4)), stockguard.ErrOrderMismatch)
				want(t, "Hold t1", o.Hold(ctx, "t1", time.Hour, line("x", 1)), stockguard.ErrOrderMismatch)
				want(t, "Restock again", o.Restock(ctx, "r", "y", 5), nil)
				want(t, "Confirm t1", o.Confirm(ctx, "t1"), nil)
				want(t, "Confirm r", o.Confirm(ctx, "r"), stockguard.ErrOrderMismatch)
				wantLevels(t, o, map[string]int64{"x": 94, "y": 102, odd: 97})
				onOrdersMatchLedger(t, db, table)
				want(t, "Return t3", o.Return(ctx, "t3"), nil)
				want(t, "Return t3 again", o.Return(ctx, "t3"), nil)
				want(t, "Take t3 closed", o.Take(ctx, "t3", line("x", 4), line("y", 3), line(odd, 2)), stockguard.ErrOrderClosed)
				wantLevels(t, o, map[string]int64{"x": 98, "y": 105, odd: 99})
				onOrdersMatchLedger(t, db, table)
				if name == "batched" {
					lockingWay(t, db, table)
				}
			})
		}
	})
}

// lockingWay records a Take in a batch that goes the locking way (a
// refused order beside it): no line row there either.
func lockingWay(t *testing.T, db *sqlx.DB, table string) {
	t.Helper()
	ctx := t.Context()
	b, err := NewBatched(db, WithTable(table), WithOrderLanes(1)) // one queue: the calls below share a batch
	if err != nil {
		t.Fatal(err)
	}
	stockAll(t, b, map[string]int64{"gate": 10, "scarce": 1})
	release := queueBehind(t, b, table, "gate")
	results := queueCalls(t, b,
		func() error { return b.Take(ctx, "lw-granted", line("scarce", 1), line("x", 1)) },
		func() error { return b.Take(ctx, "lw-refused", line("scarce", 1)) },
		func() error { return b.Hold(ctx, "lw-held", time.Hour, line("x", 2)) },
	)
	release()
	want(t, "granted", <-results[0], nil)
	want(t, "refused", <-results[1], stockguard.ErrInsufficientStock)
	want(t, "held", <-results[2], nil)
	for id, n := range map[string]int{"lw-granted": 0, "lw-refused": 0, "lw-held": 1, "first-gate": 0} {
		if got := lineRows(t, db, table, id); got != n {
			t.Errorf("%s: %d line rows, want %d", id, got, n)
		}
	}
	wantOrder(t, b, "lw-granted", stockguard.OrderTaken, line("scarce", 1), line("x", 1))
	onOrdersMatchLedger(t, db, table)
}

// oldLedger makes table's ledger as it was before line_list: every order's
// lines are rows. It records, by SQL as the older version wrote them, over
// x (20 units) and y (10): taken (x 3, y 1), held (x 2, an hour left),
// returned (x 1), expiring (x 1, held, its deadline passed, not
// reclaimed), restocked (y 4).
func oldLedger(t *testing.T, db *sqlx.DB, table string) {
	t.Helper()
	if _, err := db.Exec("ALTER TABLE " + quote(OrdersTable(table)) + " DROP COLUMN line_list"); err != nil {
		t.Fatal(err)
	}
	o, l := quote(OrdersTable(table)), quote(OrderLinesTable(table))
	for _, q := range []string{
		"INSERT INTO " + quote(table) + " (sku, qty, on_orders) VALUES ('x', 14, 6), ('y', 13, 1)",
		fmt.Sprintf("INSERT INTO %s (id, kind, state, deadline, created_at, changed_at) VALUES "+
			"('taken', %d, %d, NULL, %s, %s), ('held', %d, %d, %s + INTERVAL 1 HOUR, %s, %s), ('returned', %d, %d, NULL, %s, %s), "+
			"('expiring', %d, %d, %s - INTERVAL 1 SECOND, %s, %s), ('restocked', %d, %d, NULL, %s, %s)", o,
			kindTake, stockguard.OrderTaken, now, now,
			kindHold, stockguard.OrderHeld, now, now, now,
			kindTake, stockguard.OrderReturned, now, now,
			kindHold, stockguard.OrderHeld, now, now, now,
			kindRestock, stockguard.OrderTaken, now, now),
		"INSERT INTO " + l + " (order_id, sku, qty, expires) SELECT 'taken', 'x', 3, NULL UNION ALL SELECT 'taken', 'y', 1, NULL UNION ALL " +
			"SELECT 'returned', 'x', 1, NULL UNION ALL SELECT 'restocked', 'y', 4, NULL UNION ALL " +
			"SELECT order_id, 'x', qty, deadline FROM (SELECT id AS order_id, IF(id = 'held', 2, 1) AS qty, deadline FROM " + o + " WHERE kind = " + fmt.Sprint(int(kindHold)) + ") h",
	} {
		if _, err := db.Exec(q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
}

// CreateSchema over a ledger made before line_list adds the column; the
// orders recorded before keep their line rows and answer as before —
// retries, Order, Confirm, Return, expiry, PurgeOrders — and new Takes
// are recorded in the new layout. Before the upgrade, order calls are
// ErrUnavailable and change nothing.
func TestCreateSchema_addsLineList(t *testing.T) {
	bothPaths(t, func(t *testing.T, db *sqlx.DB) {
		for _, name := range orderStrategyNames {
			t.Run(name, func(t *testing.T) {
				table := newTable(t, db)
				oldLedger(t, db, table)
				ctx := t.Context()
				o := orderStrategies(db, WithTable(table))[name]
				want(t, "Take before the upgrade", o.Take(ctx, "new", line("x", 1)), stockguard.ErrUnavailable)
				want(t, "Take cart before the upgrade", o.Take(ctx, "new", line("x", 1), line("y", 1)), stockguard.ErrUnavailable)
				want(t, "Return before the upgrade", o.Return(ctx, "taken"), stockguard.ErrUnavailable)
				_, err := o.Order(ctx, "taken")
				want(t, "Order before the upgrade", err, stockguard.ErrUnavailable)
				if qty, _ := level(t, db, table, "x"); qty != 14 {
					t.Fatalf("x row %d, want 14", qty)
				}

				// Several upgrades at once: one adds the column.
				var wg sync.WaitGroup
				errs := make([]error, 4)
				for i := range errs {
					wg.Go(func() { errs[i] = CreateSchema(ctx, db, WithTable(table)) })
				}
				wg.Wait()
				for _, err := range errs {
					if err != nil {
						t.Fatal("CreateSchema:", err)
					}
				}

				wantOrder(t, o, "taken", stockguard.OrderTaken, line("x", 3), line("y", 1))
				want(t, "Take taken again", o.Take(ctx, "taken", line("y", 1), line("x", 3)), nil)
				want(t, "Take taken other", o.Take(ctx, "taken", line("x", 3)), stockguard.ErrOrderMismatch)
				want(t, "Hold held again", o.Hold(ctx, "held", time.Hour, line("x", 2)), nil)
				want(t, "Take returned again", o.Take(ctx, "returned", line("x", 1)), stockguard.ErrOrderClosed)
				want(t, "Restock again", o.Restock(ctx, "restocked", "y", 4), nil)
				want(t, "Return restocked", o.Return(ctx, "restocked"), stockguard.ErrOrderMismatch)
				wantOrder(t, o, "expiring", stockguard.OrderExpired, line("x", 1)) // reclaimed: x 15
				want(t, "Confirm expiring", o.Confirm(ctx, "expiring"), stockguard.ErrOrderClosed)
				want(t, "Confirm held", o.Confirm(ctx, "held"), nil)
				wantOrder(t, o, "held", stockguard.OrderTaken, line("x", 2))
				want(t, "Return taken", o.Return(ctx, "taken"), nil) // x 18, y 14
				want(t, "Return taken again", o.Return(ctx, "taken"), nil)
				want(t, "Return returned", o.Return(ctx, "returned"), nil)
				wantLevels(t, o, map[string]int64{"x": 18, "y": 14})

				want(t, "Take new", o.Take(ctx, "new", line("x", 1), line("y", 2)), nil)
				want(t, "Take new again", o.Take(ctx, "new", line("x", 1), line("y", 2)), nil)
				want(t, "Hold new", o.Hold(ctx, "new-held", time.Hour, line("y", 1)), nil)
				if n, h := lineRows(t, db, table, "new"), lineRows(t, db, table, "new-held"); n != 0 || h != 1 {
					t.Errorf("new orders: %d and %d line rows, want 0 and 1", n, h)
				}
				wantOrder(t, o, "new", stockguard.OrderTaken, line("x", 1), line("y", 2))
				wantLevels(t, o, map[string]int64{"x": 17, "y": 11})
				onOrdersMatchLedger(t, db, table)
				want(t, "Return new", o.Return(ctx, "new"), nil)
				wantLevels(t, o, map[string]int64{"x": 18, "y": 13})
				onOrdersMatchLedger(t, db, table)

				// Every closed record, of either layout, is purged whole.
				if _, err := db.Exec("UPDATE " + quote(OrdersTable(table)) + " SET changed_at = changed_at - INTERVAL 2 DAY"); err != nil {
					t.Fatal(err)
				}
				n, err := PurgeOrders(ctx, db, WithTable(table), WithOrderRetention(24*time.Hour))
				if err != nil || n != 6 { // all but new-held
					t.Fatalf("PurgeOrders = %d, %v; want 6", n, err)
				}
				for _, id := range []string{"taken", "held", "returned", "expiring", "restocked", "new"} {
					if got := ledgerRows(t, db, table, id); got != 0 {
						t.Errorf("%s: %d ledger rows left", id, got)
					}
				}
			})
		}
	})
}
