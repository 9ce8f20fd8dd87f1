package mysqllock

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/stockguard/stockguard"
	"github.com/stockguard/stockguard/internal/must"
)

func TestPessimistic_Decrement_busyRow(t *testing.T) {
	db := testDB(t, interpolate)
	for _, m := range []LockMode{LockNoWait, LockSkipLocked} {
		t.Run(m.String(), func(t *testing.T) {
			table := newTable(t, db)
			mustSet(t, db, table, "hot", 10)
			// A mode that waited for the lock would wait the server's
			// innodb_lock_wait_timeout (these modes set none); the context
			// ends at half of it, so such a wait would end with the
			// context's error, not report the row busy.
			var wait int
			if err := db.Get(&wait, "SELECT @@GLOBAL.innodb_lock_wait_timeout"); err != nil {
				t.Fatal(err)
			}
			p := must.New(NewPessimistic(db, WithTable(table), WithLockMode(m)))
			tx := holdRow(t, db, table, "hot", "FOR UPDATE")
			guard, cancel := context.WithTimeout(t.Context(), time.Duration(wait)*time.Second/2)
			defer cancel()
			contractOne(t, p.Decrement(guard, "hot", 1), stockguard.ErrContention)
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
	if got, want := p.session.stmt, "SET SESSION innodb_lock_wait_timeout = 1"; got != want {
		t.Errorf("session statement %q, want %q", got, want)
	}
	tx := holdRow(t, db, table, "hot", "FOR UPDATE")
	defer tx.Rollback()
	// The server's lock wait timeout ends the wait (1205), well before
	// the context, a hang guard, would.
	guard, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	began := time.Now()
	err := p.Decrement(guard, "hot", 1)
	took := time.Since(began)
	contractOne(t, err, stockguard.ErrContention)
	if me := (*mysql.MySQLError)(nil); !errors.As(err, &me) || me.Number != erLockWaitTimeout {
		t.Errorf("the wait ended with %v, want the server's lock wait timeout (%d)", err, erLockWaitTimeout)
	}
	if took < 900*time.Millisecond {
		t.Errorf("gave up after %v, before the 1s lock wait timeout", took)
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
