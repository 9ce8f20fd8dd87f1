package mysqllock

import (
	"fmt"
	"testing"

	"github.com/jmoiron/sqlx"
	"github.com/stockguard/stockguard"
	"github.com/stockguard/stockguard/strategy"
)

// conflicts calls start, which must make the strategy under test
// decrement sku, and makes the CAS of its next n attempts fail,
// deterministically: a transaction locks the row before start; the
// strategy reads (a plain read does not wait) and its UPDATE queues behind
// the lock; the transaction moves the version, queues the next transaction
// behind the UPDATE, and commits; the UPDATE finds a version it did not
// read and the next transaction gets the row before the strategy's next
// attempt can.
func conflicts(t *testing.T, db *sqlx.DB, table, sku string, n int, start func()) {
	t.Helper()
	tx := holdRow(t, db, table, sku, "FOR UPDATE")
	start()
	for i := range n {
		waitingOn(t, db, "UPDATE "+quote(table))
		if _, err := tx.Exec("UPDATE "+quote(table)+" SET version = version + 1 WHERE sku = ?", sku); err != nil {
			t.Fatal(err)
		}
		var next *sqlx.Tx
		locked := make(chan error, 1)
		if i < n-1 {
			var err error
			if next, err = db.BeginTxx(t.Context(), nil); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { next.Rollback() })
			go func() {
				var qty int64
				locked <- next.QueryRowx("SELECT qty FROM "+quote(table)+" WHERE sku = ? FOR UPDATE", sku).Scan(&qty)
			}()
			waitingOn(t, db, "SELECT qty FROM "+quote(table))
		}
		if err := tx.Commit(); err != nil {
			t.Fatal(err)
		}
		if next != nil {
			if err := <-locked; err != nil {
				t.Fatal(err)
			}
			tx = next
		}
	}
}

func TestOptimistic_Decrement_retriesOnConflict(t *testing.T) {
	db := testDB(t, interpolate)
	table := newTable(t, db)
	mustSet(t, db, table, "hot", 10)
	o, err := NewOptimistic(db, WithTable(table))
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	conflicts(t, db, table, "hot", 1, func() {
		go func() { done <- o.Decrement(t.Context(), "hot", 3) }()
	})
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if got := o.Retries(); got != 1 {
		t.Errorf("Retries() = %d, want 1", got)
	}
	if qty, _ := level(t, db, table, "hot"); qty != 7 {
		t.Errorf("qty %d, want 7", qty)
	}
}

func TestOptimistic_Decrement_attemptsBounded(t *testing.T) {
	db := testDB(t, interpolate)
	for _, attempts := range []int{1, 3} {
		t.Run(fmt.Sprint(attempts), func(t *testing.T) {
			table := newTable(t, db)
			mustSet(t, db, table, "hot", 10)
			o, err := NewOptimistic(db, WithTable(table), WithRetry(strategy.RetryPolicy{MaxAttempts: attempts}))
			if err != nil {
				t.Fatal(err)
			}
			done := make(chan error, 1)
			conflicts(t, db, table, "hot", attempts, func() {
				go func() { done <- o.Decrement(t.Context(), "hot", 1) }()
			})
			contractOne(t, <-done, stockguard.ErrContention)
			if got := o.Retries(); got != int64(attempts-1) {
				t.Errorf("Retries() = %d, want %d", got, attempts-1)
			}
			if qty, version := level(t, db, table, "hot"); qty != 10 || version != int64(attempts) {
				t.Errorf("qty %d version %d, want 10 and %d (only the conflicting writer's bumps)", qty, version, attempts)
			}
		})
	}
}
