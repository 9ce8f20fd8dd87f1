package mysqllock

import (
	"fmt"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/stockguard/stockguard"
	"github.com/stockguard/stockguard/internal/must"
)

// A batch with a Confirm and a Return goes the optimistic way on a
// multiStatements pool: granted whole when its net units fit, so a Take
// queued before a Return gets the Return's units there, while the locking
// way (statement by statement) decides in arrival order and refuses it.
// The Confirm and Return move their orders and clear their holds either way.
func TestBatched_Return_optimisticBatchGrantsOnNetUnits(t *testing.T) {
	bothPaths(t, func(t *testing.T, db *sqlx.DB) {
		table := newTable(t, db)
		ctx := t.Context()
		b, err := NewBatched(db, WithTable(table), WithOrderLanes(1)) // one queue: the calls below share a batch
		if err != nil {
			t.Fatal(err)
		}
		stockAll(t, b, map[string]int64{"gate": 2, "x": 2, "y": 2})
		want(t, "Hold back", b.Hold(ctx, "back", stockguard.MaxHoldTTL, line("x", 2)), nil)
		want(t, "Hold keep", b.Hold(ctx, "keep", stockguard.MaxHoldTTL, line("y", 1)), nil)
		release := queueBehind(t, b, table, "gate")
		calls := []func() error{
			func() error { return b.Take(ctx, "early", line("x", 2)) },
			func() error { return b.Return(ctx, "back") },
			func() error { return b.Confirm(ctx, "keep") },
		}
		results := queueCalls(t, b, calls...)
		release()
		optimistic := t.Name() == "TestBatched_Return_optimisticBatchGrantsOnNetUnits/multiStatements"
		early, left := error(stockguard.ErrInsufficientStock), int64(2)
		if optimistic {
			early, left = nil, 0
		}
		for i, target := range []error{early, nil, nil} {
			want(t, fmt.Sprint("call ", i), <-results[i], target)
		}
		for id, st := range map[string]stockguard.OrderState{"back": stockguard.OrderReturned, "keep": stockguard.OrderTaken} {
			if s := stateOf(t, b, id); s != st {
				t.Errorf("%s: %v, want %v", id, s, st)
			}
			var held int
			if err := db.GetContext(ctx, &held, "SELECT COUNT(*) FROM "+quote(OrderLinesTable(table))+" WHERE order_id = ? AND expires IS NOT NULL", id); err != nil {
				t.Fatal(err)
			}
			if held != 0 {
				t.Errorf("%s: %d lines still expire", id, held)
			}
		}
		for sku, n := range map[string]int64{"x": left, "y": 1} {
			if got := stockOf(t, b, sku); got != n {
				t.Errorf("%s: %d left, want %d", sku, got, n)
			}
		}
	})
}

// Two instances return one order at once: both read it taken, and the
// second's conditional UPDATE, after the first committed, changes no row —
// its check fails, its batch rolls back and goes the locking way, which
// answers from the record. The units come back once.
func TestBatched_Return_concurrentReturnsCreditOnce(t *testing.T) {
	db := testDB(t, multi)
	table := newTable(t, db)
	ctx := t.Context()
	b1, b2 := must.New(NewBatched(db, WithTable(table))), must.New(NewBatched(db, WithTable(table)))
	if err := b1.SetStock(ctx, "x", 5); err != nil {
		t.Fatal(err)
	}
	want(t, "Take", b1.Take(ctx, "o", line("x", 3)), nil)
	// Hold the order row: both Returns read it (a plain read waits for
	// nothing) and then wait in their UPDATE.
	tx, err := db.BeginTxx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tx.Rollback() })
	if _, err := tx.ExecContext(ctx, "SELECT id FROM "+quote(OrdersTable(table))+" WHERE id = 'o' FOR UPDATE"); err != nil {
		t.Fatal(err)
	}
	r1, r2 := make(chan error, 1), make(chan error, 1)
	go func() { r1 <- b1.Return(ctx, "o") }()
	go func() { r2 <- b2.Return(ctx, "o") }()
	lockWaits(t, db, 2)
	if err := tx.Rollback(); err != nil {
		t.Fatal(err)
	}
	want(t, "Return 1", <-r1, nil)
	want(t, "Return 2", <-r2, nil)
	if got := stockOf(t, b1, "x"); got != 5 {
		t.Errorf("x: %d left, want 5", got)
	}
	if s := stateOf(t, b1, "o"); s != stockguard.OrderReturned {
		t.Errorf("o: %v, want returned", s)
	}
}

// lockWaits polls until n transactions wait for a row lock.
func lockWaits(t *testing.T, db *sqlx.DB, n int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		time.Sleep(120 * time.Millisecond) // see waitingOn: the table refreshes every 100ms
		var waiting int
		if err := db.GetContext(t.Context(), &waiting, "SELECT COUNT(*) FROM information_schema.INNODB_TRX WHERE trx_state = 'LOCK WAIT'"); err != nil {
			t.Fatal(err)
		}
		if waiting == n {
			return
		}
	}
	t.Fatalf("no %d transactions waiting for a lock", n)
}
