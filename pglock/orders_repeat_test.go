package pglock

import (
	"context"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/stockguard/stockguard"
	"github.com/stockguard/stockguard/internal/combine/combinetest"
	"github.com/stockguard/stockguard/internal/must"
	"github.com/stockguard/stockguard/internal/ordersload"
)

// A caller who leaves while its batch's write is held is answered
// ErrOutcomeUnknown; when that write then fails without effect (here a
// duplicate ID of a batch-mate) and the batch is tried again, the later
// attempt must leave the order out: its repeat on another instance,
// refused meanwhile, would otherwise be a refusal of an order that is then
// taken.
func TestBatched_callerWhoLeftIsNotWrittenByALaterAttempt(t *testing.T) {
	db := testDB(t)
	table := newTable(t, db)
	b1 := must.New(NewBatched(db, WithTable(table)))
	b2 := must.New(NewBatched(db, WithTable(table)))
	ctx := t.Context()
	for sku, n := range map[string]int64{"s": 0, "w": 10, "z": 10} {
		want(t, "SetStock "+sku, b1.SetStock(ctx, sku, n), nil)
	}
	// Uncommitted records: an order INSERT with the same ID waits on them.
	uncommitted := func(id string) *sqlx.Tx {
		tx, err := db.BeginTxx(context.WithoutCancel(ctx), nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { tx.Rollback() })
		if err := b1.record(ctx, tx, []newOrder{{id: id, kind: kindTake, lines: []stockguard.Line{line("w", 1), line("z", 1)}}}); err != nil {
			t.Fatal(err)
		}
		return tx
	}
	gate, dup := uncommitted("c1"), uncommitted("d")

	// c1 goes out alone and waits on gate; d and x queue behind it and go
	// out together, and their INSERT waits on dup.
	c1 := make(chan error, 1)
	go func() { c1 <- b1.Take(ctx, "c1", line("w", 1), line("z", 1)) }()
	pgLockWaits(t, db, table, 1)
	d := make(chan error, 1)
	go func() { d <- b1.Take(ctx, "d", line("w", 1), line("z", 1)) }()
	combinetest.Queued(t, b1.orders, orderQueue, 1)
	actx, leave := context.WithCancel(ctx)
	first := make(chan error, 1)
	go func() { first <- b1.Take(actx, "x", line("s", 1), line("w", 1)) }()
	combinetest.Queued(t, b1.orders, orderQueue, 2)
	if err := gate.Rollback(); err != nil {
		t.Fatal(err)
	}
	want(t, "c1", <-c1, nil)
	pgLockWaits(t, db, table, 1) // the batch of d and x, on dup
	leave()
	firstErr := <-first

	repeatErr := b2.Take(ctx, "x", line("s", 1), line("w", 1))
	want(t, "SetStock s", b2.SetStock(ctx, "s", 1), nil)
	if err := dup.Commit(); err != nil {
		t.Fatal(err)
	}
	want(t, "d", <-d, nil) // answered from the record dup left

	ordersload.RepeatAgrees(t, b1, "x", firstErr, repeatErr)
}

// pgLockWaits waits until n statements on table's tables wait for a lock.
func pgLockWaits(t *testing.T, db *sqlx.DB, table string, n int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		var got int
		err := db.GetContext(t.Context(), &got, "SELECT COUNT(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query LIKE '%'||$1||'%'", table)
		if err != nil {
			t.Fatal(err)
		}
		if got == n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d statements wait for a lock, want %d", got, n)
		}
		time.Sleep(time.Millisecond)
	}
}

// The careful caller's load — short deadlines, repeats on any instance
// until the answer is definite, restocks among them — over two Batched
// instances and an Atomic one on one table: every refusal stands in the
// ledger afterwards, every acknowledgement too, and units add up.
func TestOrders_repeatsAgreeWithTheLedger(t *testing.T) {
	db := testDB(t)
	table := newTable(t, db)
	insts := []stockguard.Orders{
		must.New(NewBatched(db, WithTable(table))),
		must.New(NewBatched(db, WithTable(table))),
		must.New(NewAtomic(db, WithTable(table))),
	}
	ordersload.Repeats(t, insts, func() { pgSettled(t, db, table) }, 12, 2000)
}

// pgSettled waits until no statement on table's tables runs: every
// abandoned attempt has ended.
func pgSettled(t *testing.T, db *sqlx.DB, table string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		var n int
		err := db.GetContext(t.Context(), &n, "SELECT COUNT(*) FROM pg_stat_activity WHERE pid <> pg_backend_pid() AND state <> 'idle' AND query LIKE '%'||$1||'%'", table)
		if err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("a statement on the table still runs")
		}
		time.Sleep(time.Millisecond)
	}
}
