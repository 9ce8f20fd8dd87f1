package mysqllock

import (
	"context"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/stockguard/stockguard"
)

// An order on a SKU a batch lately refused an order on is refused by a
// plain read of the row, not under its lock: it is answered while another
// transaction holds the row, and an order on another SKU in flight with it
// is granted.
func TestBatched_Take_shortSKURefusedWithoutLock(t *testing.T) {
	bothPaths(t, func(t *testing.T, db *sqlx.DB) {
		table := newTable(t, db)
		ctx := t.Context()
		b, err := NewBatched(db, WithTable(table))
		if err != nil {
			t.Fatal(err)
		}
		stockAll(t, b, map[string]int64{"x": 1, "y": 5})
		want(t, "Take a", b.Take(ctx, "a", line("x", 1)), nil)
		want(t, "Take b", b.Take(ctx, "b", line("x", 1)), stockguard.ErrInsufficientStock)
		holdRow(t, db, table, "x", "FOR UPDATE")
		// A Take that waited for x's lock would end at the lock wait
		// timeout (5s) with ErrContention, not be refused; the context is
		// a hang guard only.
		quick, cancel := context.WithTimeout(ctx, time.Minute)
		defer cancel()
		want(t, "Take c", b.Take(quick, "c", line("y", 1), line("x", 1)), stockguard.ErrInsufficientStock)
		want(t, "Take d", b.Take(quick, "d", line("y", 2)), nil)
		if n := ledgerRows(t, db, table, "c"); n != 0 {
			t.Errorf("the refused order left %d ledger rows", n)
		}
		if got := stockOf(t, b, "y"); got != 3 {
			t.Errorf("y: %d left, want 3", got)
		}
	})
}
