package pglock

import (
	"database/sql"
	"fmt"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/stockguard/stockguard"
	"github.com/stockguard/stockguard/internal/combine/combinetest"
)

// stockAll sets the stock of each SKU of levels through o.
func stockAll(t *testing.T, o stockguard.Orders, levels map[string]int64) {
	t.Helper()
	for sku, qty := range levels {
		if err := o.SetStock(t.Context(), sku, qty); err != nil {
			t.Fatal(err)
		}
	}
}

// queueBehind holds the row of "gate" (stocked by the caller) in a
// transaction of its own and starts a cart of "gate" and "gate2" on b,
// which takes b's order queue and waits for the row: orders of several
// lines placed meanwhile queue behind it. The returned func lets the cart
// through and checks it was granted.
func queueBehind(t *testing.T, b *Batched, db *sqlx.DB, table string) func() {
	t.Helper()
	tx, err := db.BeginTxx(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.ExecContext(t.Context(), "SELECT 1 FROM "+quote(table)+" WHERE sku = 'gate' FOR UPDATE"); err != nil {
		t.Fatal(err)
	}
	first := make(chan error, 1)
	go func() { first <- b.Take(t.Context(), "first", line("gate", 1), line("gate2", 1)) }()
	deadline := time.Now().Add(10 * time.Second)
	for {
		var n int
		err := db.GetContext(t.Context(), &n, "SELECT COUNT(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query LIKE '%'||$1||'%'", table)
		if err != nil {
			t.Fatal(err)
		}
		if n > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the first cart never waited for the gate row")
		}
		time.Sleep(time.Millisecond)
	}
	return func() {
		t.Helper()
		if err := tx.Rollback(); err != nil && err != sql.ErrTxDone {
			t.Fatal(err)
		}
		want(t, "first", <-first, nil)
	}
}

// queueCalls starts each call in its own goroutine, in order, each once
// the one before is queued in b's order queue (held up by queueBehind),
// and returns their answers' channels.
func queueCalls(t *testing.T, b *Batched, calls ...func() error) []chan error {
	t.Helper()
	results := make([]chan error, len(calls))
	for i, call := range calls {
		results[i] = make(chan error, 1)
		go func() { results[i] <- call() }()
		combinetest.Queued(t, b.orders, orderQueue, i+1)
	}
	return results
}

// ledgerRows counts the order and line rows recorded under id.
func ledgerRows(t *testing.T, db *sqlx.DB, table, id string) int {
	t.Helper()
	var n int
	err := db.GetContext(t.Context(), &n, "SELECT (SELECT COUNT(*) FROM "+quote(OrdersTable(table))+" WHERE id = $1) + (SELECT COUNT(*) FROM "+quote(OrderLinesTable(table))+" WHERE order_id = $1)", id)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// Carts of several lines from many buyers share one transaction: each is
// granted or refused whole, in arrival order, and a refused cart leaves
// its batch-mates alone.
func TestBatched_Take_groupCommitAcrossSKUs(t *testing.T) {
	db := testDB(t)
	table := newTable(t, db)
	ctx := t.Context()
	b, err := NewBatched(db, WithTable(table))
	if err != nil {
		t.Fatal(err)
	}
	stockAll(t, b, map[string]int64{"gate": 10, "gate2": 10, "a": 100, "b": 100, "scarce": 3})
	release := queueBehind(t, b, db, table)
	// Queued in this order: carts 0–3 take one "scarce" unit each (the
	// fourth is refused whole), carts 4–7 take "a" and "b" only.
	const carts = 8
	calls := make([]func() error, carts)
	for i := range calls {
		lines := []stockguard.Line{line("a", 2), line("b", 1)}
		if i < 4 {
			lines = append(lines, line("scarce", 1))
		}
		calls[i] = func() error { return b.Take(ctx, fmt.Sprintf("cart-%d", i), lines...) }
	}
	results := queueCalls(t, b, calls...)
	before := b.Stats()
	release()
	for i, ch := range results {
		target := error(nil)
		if i == 3 {
			target = stockguard.ErrInsufficientStock
		}
		want(t, fmt.Sprintf("cart %d", i), <-ch, target)
	}
	// The first cart's own write, then one batch of every cart.
	if got := b.Stats(); got.OrderBatches-before.OrderBatches != 2 || got.OrderRequests-before.OrderRequests != carts+1 {
		t.Errorf("%d orders in %d batches, want %d in 2", got.OrderRequests-before.OrderRequests, got.OrderBatches-before.OrderBatches, carts+1)
	}
	if n := ledgerRows(t, db, table, "cart-3"); n != 0 {
		t.Errorf("the refused cart left %d ledger rows", n)
	}
	wantLevels(t, b, map[string]int64{"a": 100 - 7*2, "b": 100 - 7, "scarce": 0, "gate": 9, "gate2": 9})
	onOrdersMatchLedger(t, db, table)
}

// A cart whose ID is recorded already, queued with new carts, is answered
// from its record and takes nothing twice; the same ID with other lines is
// a mismatch; its batch-mates are granted.
func TestBatched_Take_retriedIDTakesOnce(t *testing.T) {
	db := testDB(t)
	table := newTable(t, db)
	ctx := t.Context()
	b, err := NewBatched(db, WithTable(table))
	if err != nil {
		t.Fatal(err)
	}
	stockAll(t, b, map[string]int64{"gate": 10, "gate2": 10, "a": 100, "b": 100})
	cart := []stockguard.Line{line("a", 5), line("b", 5)}
	want(t, "Take", b.Take(ctx, "dup", cart...), nil)
	release := queueBehind(t, b, db, table)
	results := queueCalls(t, b,
		func() error { return b.Take(ctx, "new-0", line("a", 1), line("b", 1)) },
		func() error { return b.Take(ctx, "dup", cart...) },
		func() error { return b.Take(ctx, "new-1", line("a", 1), line("b", 1)) },
		func() error { return b.Hold(ctx, "dup", time.Minute, cart...) },
	)
	release()
	for i, target := range []error{nil, nil, nil, stockguard.ErrOrderMismatch} {
		want(t, fmt.Sprintf("call %d", i), <-results[i], target)
	}
	wantLevels(t, b, map[string]int64{"a": 100 - 5 - 2, "b": 100 - 5 - 2})
	onOrdersMatchLedger(t, db, table)
}

// A cart short of units that an expired hold has is granted: its batch
// reclaims the hold first.
func TestBatched_Take_reclaimsExpiredHoldInBatch(t *testing.T) {
	db := testDB(t)
	table := newTable(t, db)
	ctx := t.Context()
	b, err := NewBatched(db, WithTable(table))
	if err != nil {
		t.Fatal(err)
	}
	stockAll(t, b, map[string]int64{"x": 4, "y": 4})
	want(t, "Hold", b.Hold(ctx, "held", time.Millisecond, line("x", 4), line("y", 1)), nil)
	time.Sleep(10 * time.Millisecond)
	want(t, "Take", b.Take(ctx, "after", line("x", 4), line("y", 4)), nil)
	info, err := b.Order(ctx, "held")
	want(t, "Order", err, nil)
	if info.State != stockguard.OrderExpired {
		t.Errorf("held: %v, want expired", info.State)
	}
	if b.Retries() == 0 {
		t.Error("the batch did not reclaim and try again")
	}
	onOrdersMatchLedger(t, db, table)
}
