package mysqllock

import (
	"errors"
	"fmt"
	"testing"

	"github.com/go-sql-driver/mysql"
	"github.com/jmoiron/sqlx"

	"github.com/stockguard/stockguard"
	"github.com/stockguard/stockguard/internal/combine/combinetest"
)

// multi lets a connection send several statements, with parameters, in
// one round trip: the batches' two-round-trip path.
func multi(c *mysql.Config) { c.InterpolateParams, c.MultiStatements = true, true }

// bothPaths runs test over a pool whose batches go statement by statement
// and over one whose batches take two round trips.
func bothPaths(t *testing.T, test func(*testing.T, *sqlx.DB)) {
	for _, p := range []struct {
		name string
		edit func(*mysql.Config)
	}{{"statements", interpolate}, {"multiStatements", multi}} {
		t.Run(p.name, func(t *testing.T) { test(t, testDB(t, p.edit)) })
	}
}

// queueBehind holds sku's row, starts a Take on it that waits for the
// row, and returns a function that lets it go and checks its answer:
// Takes and Holds made meanwhile queue for one batch. The Take waits in
// its UPDATE (placeFast) or its locking read, whichever way it goes.
func queueBehind(t *testing.T, b *Batched, table, sku string) func() {
	t.Helper()
	tx := holdRow(t, b.db, table, sku, "FOR UPDATE")
	first := make(chan error, 1)
	go func() { first <- b.Take(t.Context(), "first-"+sku, line(sku, 1)) }()
	waitingOn(t, b.db, "")
	return func() {
		t.Helper()
		if err := tx.Rollback(); err != nil {
			t.Fatal(err)
		}
		want(t, "first", <-first, nil)
	}
}

// stockAll sets the stock of each SKU of levels through o.
func stockAll(t *testing.T, o stockguard.Orders, levels map[string]int64) {
	t.Helper()
	for sku, qty := range levels {
		if err := o.SetStock(t.Context(), sku, qty); err != nil {
			t.Fatal(err)
		}
	}
}

// queueCalls starts each call in its own goroutine, in order, each once
// the one before is queued in b's only lane (b from WithOrderLanes(1),
// its batches held up by queueBehind), and returns their answers' channels.
func queueCalls(t *testing.T, b *Batched, calls ...func() error) []chan error {
	t.Helper()
	results := make([]chan error, len(calls))
	for i, call := range calls {
		results[i] = make(chan error, 1)
		go func() { results[i] <- call() }()
		combinetest.Queued(t, b.orders, b.lanes[0], i+1)
	}
	return results
}

// Carts of several lines from many buyers share one transaction: each is
// granted or refused whole, in arrival order, and a refused cart leaves
// its batch-mates alone.
func TestBatched_Take_groupCommitAcrossSKUs(t *testing.T) { bothPaths(t, groupCommitAcrossSKUs) }

func groupCommitAcrossSKUs(t *testing.T, db *sqlx.DB) {
	table := newTable(t, db)
	ctx := t.Context()
	b, err := NewBatched(db, WithTable(table), WithOrderLanes(1)) // one queue: the calls below share a batch
	if err != nil {
		t.Fatal(err)
	}
	stockAll(t, b, map[string]int64{"gate": 10, "a": 100, "b": 100, "scarce": 3})
	release := queueBehind(t, b, table, "gate")
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
	// The first call's own write, then one batch of every cart.
	if got := b.Stats(); got.OrderBatches-before.OrderBatches != 2 || got.OrderCalls-before.OrderCalls != carts+1 {
		t.Errorf("%d calls in %d batches, want %d in 2", got.OrderCalls-before.OrderCalls, got.OrderBatches-before.OrderBatches, carts+1)
	}
	if n := ledgerRows(t, db, table, "cart-3"); n != 0 {
		t.Errorf("the refused cart left %d ledger rows", n)
	}
	wantLevels(t, b, map[string]int64{"a": 100 - 7*2, "b": 100 - 7, "scarce": 0, "gate": 9})
}

// A Return's units come back within its batch: a Take queued after it in
// the same batch gets them, and one queued before it does not.
func TestBatched_Return_unitsServeLaterCallsInBatch(t *testing.T) {
	bothPaths(t, unitsServeLaterCallsInBatch)
}

func unitsServeLaterCallsInBatch(t *testing.T, db *sqlx.DB) {
	table := newTable(t, db)
	ctx := t.Context()
	b, err := NewBatched(db, WithTable(table), WithOrderLanes(1)) // one queue: the calls below share a batch
	if err != nil {
		t.Fatal(err)
	}
	stockAll(t, b, map[string]int64{"gate": 2, "x": 2})
	want(t, "Hold", b.Hold(ctx, "held", stockguard.MaxHoldTTL, line("x", 2)), nil)
	release := queueBehind(t, b, table, "gate")
	calls := []func() error{
		func() error { return b.Take(ctx, "early", line("x", 2)) },
		func() error { return b.Return(ctx, "held") },
		func() error { return b.Take(ctx, "late", line("x", 2)) },
		func() error { return b.Confirm(ctx, "held") },
	}
	results := queueCalls(t, b, calls...)
	release()
	for i, target := range []error{stockguard.ErrInsufficientStock, nil, nil, stockguard.ErrOrderClosed} {
		want(t, fmt.Sprintf("call %d", i), <-results[i], target)
	}
	if s := stateOf(t, b, "held"); s != stockguard.OrderReturned {
		t.Errorf("held: %v, want returned", s)
	}
	if got := stockOf(t, b, "x"); got != 0 {
		t.Errorf("x: %d left, want 0", got)
	}
}

// A Take retried in a later batch, with the first one's stock gone, is
// answered from its record, not refused; and a batch whose order is
// recorded already still grants its batch-mates.
func TestBatched_Take_retriedAfterSoldOut(t *testing.T) { bothPaths(t, retriedAfterSoldOut) }

func retriedAfterSoldOut(t *testing.T, db *sqlx.DB) {
	table := newTable(t, db)
	ctx := t.Context()
	b, err := NewBatched(db, WithTable(table), WithOrderLanes(1)) // one queue: the calls below share a batch
	if err != nil {
		t.Fatal(err)
	}
	stockAll(t, b, map[string]int64{"gate": 2, "x": 2})
	want(t, "Take", b.Take(ctx, "o", line("x", 2)), nil)
	if err := b.SetStock(ctx, "x", 1); err != nil {
		t.Fatal(err)
	}
	release := queueBehind(t, b, table, "gate")
	again, mate := make(chan error, 1), make(chan error, 1)
	go func() { again <- b.Take(ctx, "o", line("x", 2)) }()
	combinetest.Queued(t, b.orders, b.lanes[0], 1)
	go func() { mate <- b.Take(ctx, "mate", line("x", 1)) }()
	combinetest.Queued(t, b.orders, b.lanes[0], 2)
	release()
	want(t, "Take again", <-again, nil)
	want(t, "mate", <-mate, nil)
	if got := stockOf(t, b, "x"); got != 0 {
		t.Errorf("x: %d left, want 0", got)
	}
	if err := b.Take(ctx, "o", line("x", 1)); !errors.Is(err, stockguard.ErrOrderMismatch) {
		t.Errorf("Take with other lines: %v, want ErrOrderMismatch", err)
	}
}

// A Take refused for want of units is refused by the locking way after
// the optimistic way rolled back, leaves no record, and has the next
// batches with its SKU screen it by a plain read first (see screen); other
// SKUs stay optimistic.
func TestBatched_Take_refusedSKUGoesLockingWay(t *testing.T) { bothPaths(t, refusedSKUGoesLockingWay) }

func refusedSKUGoesLockingWay(t *testing.T, db *sqlx.DB) {
	table := newTable(t, db)
	ctx := t.Context()
	b, err := NewBatched(db, WithTable(table))
	if err != nil {
		t.Fatal(err)
	}
	stockAll(t, b, map[string]int64{"x": 1, "y": 5})
	want(t, "Take a", b.Take(ctx, "a", line("x", 1), line("y", 1)), nil)
	if b.short.any([]stockguard.Line{line("x", 1)}) {
		t.Fatal("x remembered as short before any refusal")
	}
	want(t, "Take b", b.Take(ctx, "b", line("x", 1), line("y", 1)), stockguard.ErrInsufficientStock)
	if n := ledgerRows(t, db, table, "b"); n != 0 {
		t.Errorf("the refused order left %d ledger rows", n)
	}
	if !b.short.any([]stockguard.Line{line("x", 1)}) || b.short.any([]stockguard.Line{line("y", 1)}) {
		t.Error("want x remembered as short, y not")
	}
	want(t, "Take c", b.Take(ctx, "c", line("x", 1)), stockguard.ErrInsufficientStock)
	want(t, "Take d", b.Take(ctx, "d", line("y", 2)), nil)
	wantLevels(t, b, map[string]int64{"x": 0, "y": 2})
}
