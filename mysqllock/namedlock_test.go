package mysqllock

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/stockguard/stockguard"
	"github.com/stockguard/stockguard/internal/must"
)

// lockFree fails t unless sku's named lock is free within a second: no
// session, pooled or not, holds it.
func lockFree(t *testing.T, n *NamedLock, sku string) {
	t.Helper()
	name := lockName(*n.dbName.Load(), n.table, sku)
	deadline := time.Now().Add(time.Second)
	for {
		var free int
		if err := n.db.Get(&free, "SELECT IS_FREE_LOCK(?)", name); err != nil {
			t.Fatal(err)
		}
		if free == 1 {
			return
		}
		if time.Now().After(deadline) {
			var holder int64
			n.db.Get(&holder, "SELECT IS_USED_LOCK(?)", name)
			t.Fatalf("lock %s still held by connection %d", name, holder)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestLockName(t *testing.T) {
	long := strings.Repeat("🙂", stockguard.MaxSKULen/4)
	names := map[string]bool{}
	for _, c := range [][3]string{
		{"test", "stock", "a"}, {"test", "stock", "A"}, {"test", "stock", "a "}, {"test", "stock", long},
		{"test", "stock2", "a"}, {"other", "stock", "a"},
		// the separator keeps (db, table, sku) apart from concatenations
		{"test", "stocka", ""}, {"test", "stock", "\x00a"},
	} {
		n := lockName(c[0], c[1], c[2])
		if len(n) > 64 {
			t.Errorf("%q: %d characters", n, len(n))
		}
		if names[n] {
			t.Errorf("%v: collides", c)
		}
		names[n] = true
	}
}

func TestNamedLock_WithLock_releasedOnCancelMidHold(t *testing.T) {
	db := testDB(t, interpolate)
	table := newTable(t, db)
	mustSet(t, db, table, "hot", 10)
	n, err := NewNamedLock(db, WithTable(table))
	if err != nil {
		t.Fatal(err)
	}
	for name, body := range map[string]func(ctx context.Context, conn *sqlx.Conn) error{
		// The context ends between statements: RELEASE_LOCK still runs.
		"idle": func(ctx context.Context, _ *sqlx.Conn) error {
			<-ctx.Done()
			return ctx.Err()
		},
		// The context ends mid-statement: the driver closes the socket while
		// the server sleeps on; only killing the session frees the lock now.
		"busy": func(ctx context.Context, conn *sqlx.Conn) error {
			_, err := conn.ExecContext(ctx, "DO SLEEP(30)")
			return err
		},
	} {
		t.Run(name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(t.Context())
			held := make(chan struct{})
			done := make(chan error, 1)
			go func() {
				done <- n.WithLock(ctx, "hot", func(ctx context.Context, conn *sqlx.Conn) error {
					close(held)
					return body(ctx, conn)
				})
			}()
			<-held
			time.Sleep(50 * time.Millisecond)
			cancel()
			if err := <-done; !errors.Is(err, context.Canceled) {
				t.Fatalf("WithLock: %v, want the body's context.Canceled", err)
			}
			lockFree(t, n, "hot")
			// Named locks are reentrant per session: a pooled connection still
			// holding it would let this take it while another session waits.
			if err := n.Decrement(t.Context(), "hot", 1); err != nil {
				t.Fatal(err)
			}
			lockFree(t, n, "hot")
		})
	}
}

func TestNamedLock_WithLock_releasedOnPanic(t *testing.T) {
	db := testDB(t, interpolate)
	table := newTable(t, db)
	mustSet(t, db, table, "hot", 10)
	n, err := NewNamedLock(db, WithTable(table))
	if err != nil {
		t.Fatal(err)
	}
	func() {
		defer func() {
			if r := recover(); r != "boom" {
				t.Fatalf("recovered %v, want the body's panic", r)
			}
		}()
		n.WithLock(t.Context(), "hot", func(context.Context, *sqlx.Conn) error { panic("boom") })
	}()
	lockFree(t, n, "hot")
	if err := n.Decrement(t.Context(), "hot", 1); err != nil {
		t.Fatal(err)
	}
}

func TestNamedLock_Decrement_lockBusy(t *testing.T) {
	db := testDB(t, interpolate)
	table := newTable(t, db)
	mustSet(t, db, table, "hot", 10)
	holder := must.New(NewNamedLock(db, WithTable(table)))
	n := must.New(NewNamedLock(db, WithTable(table), WithNamedLockTimeout(200*time.Millisecond)))
	held, release := make(chan struct{}), make(chan struct{})
	go holder.WithLock(t.Context(), "hot", func(context.Context, *sqlx.Conn) error {
		close(held)
		<-release
		return nil
	})
	<-held
	// The lock timeout ends the wait (GET_LOCK answers 0), well before
	// the context, a hang guard, would (the context's error).
	guard, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	began := time.Now()
	err := n.Decrement(guard, "hot", 1)
	took := time.Since(began)
	contractOne(t, err, stockguard.ErrContention)
	if took < 150*time.Millisecond {
		t.Errorf("gave up after %v, before the 200ms lock timeout", took)
	}
	// A context deadline shorter than the lock timeout (the default, 5s)
	// bounds the wait too: its error, not the lock timeout's, ends it.
	ctx, cancel := context.WithTimeout(t.Context(), 100*time.Millisecond)
	defer cancel()
	err = must.New(NewNamedLock(db, WithTable(table))).Decrement(ctx, "hot", 1)
	contractOne(t, err, context.DeadlineExceeded)
	close(release)
	if qty, _ := level(t, db, table, "hot"); qty != 10 {
		t.Errorf("qty %d, want 10", qty)
	}
}

// A wait for a busy lock cut short by the caller's deadline is the
// context's error, as on every other strategy: the lock timeout was not
// what ended it, so it is no ErrContention.
func TestNamedLock_Decrement_deadlineWhileWaiting(t *testing.T) {
	db := testDB(t, interpolate)
	table := newTable(t, db)
	mustSet(t, db, table, "hot", 10)
	holder, err := NewNamedLock(db, WithTable(table))
	if err != nil {
		t.Fatal(err)
	}
	n, err := NewNamedLock(db, WithTable(table)) // lock timeout: the default, far above every deadline here
	if err != nil {
		t.Fatal(err)
	}
	held, release := make(chan struct{}), make(chan struct{})
	done := make(chan error, 1)
	go func() {
		done <- holder.WithLock(t.Context(), "hot", func(context.Context, *sqlx.Conn) error {
			close(held)
			<-release
			return nil
		})
	}()
	<-held
	for _, d := range []time.Duration{100 * time.Microsecond, time.Millisecond, 20 * time.Millisecond, 100 * time.Millisecond} {
		for range 20 {
			ctx, cancel := context.WithTimeout(t.Context(), d)
			err := n.Decrement(ctx, "hot", 1)
			cancel()
			if !errors.Is(err, context.DeadlineExceeded) || errors.Is(err, stockguard.ErrContention) {
				t.Errorf("%v deadline on a held lock: %v, want context.DeadlineExceeded", d, err)
			}
		}
	}
	close(release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if qty, _ := level(t, db, table, "hot"); qty != 10 {
		t.Errorf("qty %d, want 10", qty)
	}
}

// NewNamedLock refuses TiDB: told the engine, every method fails before any
// I/O with ErrUnavailable and says why.
func TestNewNamedLock_refusesTiDB(t *testing.T) {
	db := testDB(t, interpolate)
	table := newTable(t, db)
	mustSet(t, db, table, "hot", 10)
	n, err := NewNamedLock(db, WithTable(table), WithEngine(EngineTiDB))
	if err != nil {
		t.Fatal(err)
	}
	for name, err := range map[string]error{
		"Decrement": n.Decrement(t.Context(), "hot", 1),
		"SetStock":  n.SetStock(t.Context(), "hot", 5),
		"WithLock":  n.WithLock(t.Context(), "hot", func(context.Context, *sqlx.Conn) error { return nil }),
	} {
		if !errors.Is(err, stockguard.ErrUnavailable) || !strings.Contains(err.Error(), "TiDB") {
			t.Errorf("%s on TiDB: %v, want ErrUnavailable naming TiDB", name, err)
		}
	}
	if _, err := n.Stock(t.Context(), "hot"); !errors.Is(err, stockguard.ErrUnavailable) {
		t.Errorf("Stock on TiDB: %v, want ErrUnavailable", err)
	}
	if qty, _ := level(t, db, table, "hot"); qty != 10 {
		t.Errorf("qty %d, want 10", qty)
	}
}
