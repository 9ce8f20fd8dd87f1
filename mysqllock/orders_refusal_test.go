package mysqllock

import (
	"context"
	"testing"

	"github.com/jmoiron/sqlx"

	"github.com/stockguard/stockguard"
	"github.com/stockguard/stockguard/internal/must"
)

// A call refused only because a batch-mate's grant came first is decided
// again when that batch-mate leaves and the batch is tried without it.
// Batch [a x:1, b x:1, m y:MaxQty, n y:MaxQty] with one unit of x goes
// the locking way (y's total is beyond MaxQty): a is granted, b refused;
// the locking read of b's ID waits on a test transaction that has b
// recorded, a's caller leaves, the transaction rolls back, and the batch,
// sealed, is tried again without a: b must get the unit.
func TestBatched_Take_refusedBehindABatchMateWhoLeftIsDecidedAgain(t *testing.T) {
	bothPaths(t, refusedBehindABatchMateWhoLeft)
}

func refusedBehindABatchMateWhoLeft(t *testing.T, db *sqlx.DB) {
	table := newTable(t, db)
	b := must.New(NewBatched(db, WithTable(table), WithOrderLanes(1)))
	ctx := t.Context()
	stockAll(t, b, map[string]int64{"x": 1, "y": stockguard.MaxQty, "z": 10})
	holdB, err := db.BeginTxx(context.WithoutCancel(ctx), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { holdB.Rollback() })
	if _, err := holdB.Exec("INSERT INTO "+quote(OrdersTable(table))+" (id, kind, state, created_at, changed_at) VALUES ('b', ?, ?, NOW(6), NOW(6))", kindTake, stockguard.OrderTaken); err != nil {
		t.Fatal(err)
	}

	release := queueBehind(t, b, table, "z")
	actx, leave := context.WithCancel(ctx)
	answers := queueCalls(t, b,
		func() error { return b.Take(actx, "a", line("x", 1)) },
		func() error { return b.Take(ctx, "b", line("x", 1)) },
		func() error { return b.Take(ctx, "m", line("y", stockguard.MaxQty)) },
		func() error { return b.Take(ctx, "n", line("y", stockguard.MaxQty)) })
	release()
	lockWaits(t, db, 1) // the locking read of the refused IDs b and n, on b
	leave()
	if err := <-answers[0]; err != context.Canceled {
		t.Fatalf("Take a: %v, want its context's error", err)
	}
	if err := holdB.Rollback(); err != nil {
		t.Fatal(err)
	}
	want(t, "Take b", <-answers[1], nil)
	want(t, "Take m", <-answers[2], nil)
	want(t, "Take n", <-answers[3], stockguard.ErrInsufficientStock)
	for sku, left := range map[string]int64{"x": 0, "y": 0} {
		if got := stockOf(t, b, sku); got != left {
			t.Errorf("%s: %d left, want %d", sku, got, left)
		}
	}
}
