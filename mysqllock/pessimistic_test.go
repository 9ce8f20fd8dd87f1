package mysqllock

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stockguard/stockguard"
	"github.com/stockguard/stockguard/internal/must"
)

func TestPessimistic_Decrement_busyRow(t *testing.T) {
	db := testDB(t, interpolate)
	for _, m := range []LockMode{LockNoWait, LockSkipLocked} {
		t.Run(m.String(), func(t *testing.T) {
			table := newTable(t, db)
			mustSet(t, db, table, "hot", 10)
			// A minute's lock wait: a mode that waited would show as a
			// call of tens of seconds, not as a few milliseconds more on a
			// loaded machine.
			p := must.New(NewPessimistic(db, WithTable(table), WithLockMode(m), WithLockWaitTimeout(time.Minute)))
			// Warm a connection so that the timing below is the lock's alone.
			if _, err := p.Stock(t.Context(), "hot"); err != nil {
				t.Fatal(err)
			}
			tx := holdRow(t, db, table, "hot", "FOR UPDATE")
			began := time.Now()
			err := p.Decrement(t.Context(), "hot", 1)
			took := time.Since(began)
			contractOne(t, err, stockguard.ErrContention)
			if took > 30*time.Second {
				t.Errorf("busy row reported after %v: the call waited for the lock", took)
			}
			if err := tx.Rollback(); err != nil {
				t.Fatal(err)
			}
			if err := p.Decrement(t.Context(), "hot", 1); err != nil {
				t.Fatalf("after the row was released: %v", err)
			}
			if qty, _ := level(t, db, table, "hot"); qty != 9 {
				t.Errorf("qty %d, want 9", qty)
			}
		})
	}
}

func TestPessimistic_Decrement_lockWaitTimeout(t *testing.T) {
	db := testDB(t, interpolate)
	table := newTable(t, db)
	mustSet(t, db, table, "hot", 10)
	p := must.New(NewPessimistic(db, WithTable(table), WithLockWaitTimeout(700*time.Millisecond))) // rounds up to 1s
	tx := holdRow(t, db, table, "hot", "FOR UPDATE")
	defer tx.Rollback()
	began := time.Now()
	err := p.Decrement(t.Context(), "hot", 1)
	took := time.Since(began)
	contractOne(t, err, stockguard.ErrContention)
	if took < 900*time.Millisecond || took > 3*time.Second {
		t.Errorf("gave up after %v, want about 1s", took)
	}
	// The session variable was set on the connection, not globally.
	var global int
	if err := db.Get(&global, "SELECT @@GLOBAL.innodb_lock_wait_timeout"); err != nil || global == 1 {
		t.Errorf("global innodb_lock_wait_timeout = %d, %v", global, err)
	}
}

// A context that ends while the row lock is awaited ends the wait: the
// transaction never committed, so the error is the context's, and the
// stock is untouched however the server carries on.
func TestPessimistic_Decrement_contextEndsWhileWaiting(t *testing.T) {
	db := testDB(t, interpolate)
	table := newTable(t, db)
	mustSet(t, db, table, "hot", 10)
	p := must.New(NewPessimistic(db, WithTable(table)))
	tx := holdRow(t, db, table, "hot", "FOR UPDATE")
	ctx, cancel := context.WithTimeout(t.Context(), 200*time.Millisecond)
	defer cancel()
	err := p.Decrement(ctx, "hot", 1)
	contractOne(t, err, context.DeadlineExceeded)
	if err := tx.Rollback(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(100 * time.Millisecond) // let the server finish whatever it still does
	if qty, _ := level(t, db, table, "hot"); qty != 10 {
		t.Errorf("qty %d, want 10", qty)
	}
}

// A connection killed while SELECT … FOR UPDATE waits has sent nothing that
// changes stock: ErrUnavailable (the session was ended, not busy), never
// ErrOutcomeUnknown.
func TestPessimistic_Decrement_killedBeforeUpdate(t *testing.T) {
	db := testDB(t, interpolate)
	table := newTable(t, db)
	mustSet(t, db, table, "hot", 10)
	p, err := NewPessimistic(db, WithTable(table))
	if err != nil {
		t.Fatal(err)
	}
	tx := holdRow(t, db, table, "hot", "FOR UPDATE")
	done := make(chan error, 1)
	go func() { done <- p.Decrement(t.Context(), "hot", 1) }()
	id := waitingOn(t, db, "SELECT qty FROM "+quote(table))
	if _, err := db.Exec(fmt.Sprintf("KILL CONNECTION %d", id)); err != nil {
		t.Fatal(err)
	}
	contractOne(t, <-done, stockguard.ErrUnavailable)
	tx.Rollback()
	if qty, _ := level(t, db, table, "hot"); qty != 10 {
		t.Errorf("qty %d, want 10", qty)
	}
}
