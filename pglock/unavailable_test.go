package pglock

import (
	"context"
	"testing"
	"time"

	"github.com/stockguard/stockguard"
	"github.com/stockguard/stockguard/internal/must"
	"github.com/stockguard/stockguard/strategy"
)

// A read-only server refuses every write with 25006: ErrUnavailable, never
// ErrContention, and nothing changed. default_transaction_read_only is set
// for the test's own sessions through the pool's connections.
func TestDecrement_readOnlyIsUnavailable(t *testing.T) {
	db := testDB(t)
	table := newTable(t, db)
	a, err := NewAtomic(db, WithTable(table))
	if err != nil {
		t.Fatal(err)
	}
	if err := a.SetStock(t.Context(), "ro", 5); err != nil {
		t.Fatal(err)
	}
	ro := testDB(t)
	ro.SetMaxOpenConns(1)
	if _, err := ro.ExecContext(t.Context(), "SET default_transaction_read_only = on"); err != nil {
		t.Fatal(err)
	}
	for name, inv := range map[string]stockguard.Inventory{
		"atomic":      must.New(NewAtomic(ro, WithTable(table))),
		"pessimistic": must.New(NewPessimistic(ro, WithTable(table))),
		"batched":     must.New(NewBatched(ro, WithTable(table))),
	} {
		contractOne(t, inv.Decrement(t.Context(), "ro", 1), stockguard.ErrUnavailable)
		if got, _ := a.Stock(t.Context(), "ro"); got != 5 {
			t.Fatalf("%s: stock %d after a refused write, want 5", name, got)
		}
	}
	contractOne(t, must.New(NewAtomic(ro, WithTable(table))).Take(t.Context(), "ro-order", stockguard.Line{SKU: "ro", Qty: 1}), stockguard.ErrUnavailable)
}

// A missing table (42P01) is ErrUnavailable.
func TestDecrement_missingTableIsUnavailable(t *testing.T) {
	db := testDB(t)
	contractOne(t, must.New(NewAtomic(db, WithTable("no_such_table_here"))).Decrement(t.Context(), "x", 1), stockguard.ErrUnavailable)
	contractOne(t, must.New(NewPessimistic(db, WithTable("no_such_table_here"))).Decrement(t.Context(), "x", 1), stockguard.ErrUnavailable)
}

// A busy row: NOWAIT fails at once (55P03), and a wait runs out at the
// lock timeout, which the server enforces — ErrContention both, nothing
// changed.
func TestPessimistic_busyRowIsContention(t *testing.T) {
	db := testDB(t)
	table := newTable(t, db)
	if err := must.New(NewAtomic(db, WithTable(table))).SetStock(t.Context(), "busy", 5); err != nil {
		t.Fatal(err)
	}
	tx, err := db.BeginTxx(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	if _, err := tx.ExecContext(t.Context(), "SELECT qty FROM "+quote(table)+" WHERE sku = 'busy' FOR UPDATE"); err != nil {
		t.Fatal(err)
	}
	contractOne(t, must.New(NewPessimistic(db, WithTable(table), WithLockMode(LockNoWait))).Decrement(t.Context(), "busy", 1), stockguard.ErrContention)
	// The server's lock timeout ends the wait (55P03), well before the
	// context, a hang guard, would (57014 or the context's error).
	guard, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	err = must.New(NewPessimistic(db, WithTable(table), WithLockTimeout(100*time.Millisecond))).Decrement(guard, "busy", 1)
	contractOne(t, err, stockguard.ErrContention)
	if code := sqlstate(err); code != sqlstateLockUnavailable {
		t.Fatalf("the wait ended with %v (SQLSTATE %q), want the lock timeout's %s", err, code, sqlstateLockUnavailable)
	}
	contractOne(t, must.New(NewAdvisoryLock(db, WithTable(table), WithLockTimeout(100*time.Millisecond))).Decrement(t.Context(), "busy", 1), stockguard.ErrContention)
	tx.Rollback()
	if got, _ := must.New(NewAtomic(db, WithTable(table))).Stock(t.Context(), "busy"); got != 5 {
		t.Fatalf("stock %d, want 5", got)
	}
}

// A session the server terminates (pg_terminate_backend, 57P01) between
// requests costs nothing: the next request gets a live connection.
func TestAtomic_terminatedSessionsRecover(t *testing.T) {
	db := testDB(t)
	table := newTable(t, db)
	a, err := NewAtomic(db, WithTable(table))
	if err != nil {
		t.Fatal(err)
	}
	if err := a.SetStock(t.Context(), "term", 10); err != nil {
		t.Fatal(err)
	}
	admin := testDB(t)
	if _, err := admin.ExecContext(t.Context(), "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE backend_type = 'client backend' AND pid <> pg_backend_pid() AND query LIKE '%"+table+"%'"); err != nil {
		t.Fatal(err)
	}
	ok := 0
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	for range 3 {
		if err := a.Decrement(ctx, "term", 1); err == nil {
			ok++
		} else if !strategy.IsContract(err) {
			t.Fatalf("non-contract error: %v", err)
		}
	}
	left, err := a.Stock(ctx, "term")
	if err != nil || ok == 0 || 10-left < int64(ok) {
		t.Fatalf("%d decrements succeeded, %d left (%v)", ok, left, err)
	}
}
