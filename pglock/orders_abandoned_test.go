package pglock

import (
	"bytes"
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/jmoiron/sqlx"

	"github.com/stockguard/stockguard"
	"github.com/stockguard/stockguard/internal/backends/backendstest"
	"github.com/stockguard/stockguard/internal/must"
	"github.com/stockguard/stockguard/internal/netgate"
	"github.com/stockguard/stockguard/internal/ordersload"
)

// abandoned is an Atomic on a pool of one connection through a gate and
// one on a plain pool, over one new table with SKU s stocked as asked and
// z with 1. An order of z has set up the gated connection and prepared its
// statements, so that each round trip is one write.
type abandoned struct {
	gate          *netgate.Gate
	db            *sqlx.DB // the plain pool
	table         string
	first, repeat *Atomic // on the gated pool, on db
	pid           int     // the gated connection's backend
}

func newAbandoned(t *testing.T, s int64) abandoned {
	a := abandoned{gate: netgate.New(t), db: testDB(t)}
	cfg, err := pgx.ParseConfig(backendstest.SharedPostgres(t).DSN)
	if err != nil {
		t.Fatal(err)
	}
	cfg.DialFunc = a.gate.Dial
	gated := sqlx.NewDb(stdlib.OpenDB(*cfg), "pgx")
	gated.SetMaxOpenConns(1)
	t.Cleanup(func() { gated.Close() })
	a.table = newTable(t, a.db)
	a.first = must.New(NewAtomic(gated, WithTable(a.table)))
	a.repeat = must.New(NewAtomic(a.db, WithTable(a.table)))
	ctx := t.Context()
	want(t, "SetStock s", a.repeat.SetStock(ctx, "s", s), nil)
	want(t, "SetStock z", a.repeat.SetStock(ctx, "z", 1), nil)
	want(t, "Take warm", a.first.Take(ctx, "warm", line("z", 1)), nil)
	if err := gated.GetContext(ctx, &a.pid, "SELECT pg_backend_pid()"); err != nil {
		t.Fatal(err)
	}
	return a
}

// waitCount polls the count query on db until done accepts it; failure
// says what is wrong if it never does.
func waitCount(t *testing.T, db *sqlx.DB, failure string, done func(n int) bool, query string, args ...any) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		var n int
		if err := db.GetContext(t.Context(), &n, query, args...); err != nil {
			t.Fatal(err)
		}
		if done(n) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal(failure)
		}
	}
}

func zero(n int) bool { return n == 0 }

// leaveHeld sends order x of one s from first, has its caller leave once
// the gate holds one of its writes, and returns its answer.
func (a abandoned) leaveHeld(t *testing.T) error {
	actx, leave := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- a.first.Take(actx, "x", line("s", 1)) }()
	<-a.gate.Blocked()
	leave()
	return <-done
}

// An order of one line whose statement is sent but held on its way to the
// server while its caller leaves; the repeat, on another pool, finds no
// order and no units and is refused; then a restock, and the held bytes
// reach the server: the order must not be recorded after all.
func TestAtomic_callerWhoLeftBeforeItsIDWasRecordedIsNeverWritten(t *testing.T) {
	a := newAbandoned(t, 0)
	ctx := t.Context()

	a.gate.Hold()
	firstErr := a.leaveHeld(t)
	repeatErr := a.repeat.Take(ctx, "x", line("s", 1))
	want(t, "SetStock s", a.repeat.SetStock(ctx, "s", 1), nil)
	a.gate.Release()
	// The first attempt's connection ends once the server has read all it
	// was sent.
	waitCount(t, a.db, "the first attempt's connection is still there", zero,
		"SELECT COUNT(*) FROM pg_stat_activity WHERE pid = $1", a.pid)
	ordersload.RepeatAgrees(t, a.repeat, "x", firstErr, repeatErr)
}

// readyInTransaction reports whether b ends with the server's
// ReadyForQuery in a transaction block: the reply to a round trip that
// left a transaction open.
func readyInTransaction(b []byte) bool {
	return bytes.HasSuffix(b, []byte{'Z', 0, 0, 0, 5, 'T'})
}

// An order of one line whose caller leaves once the server has answered
// that its ID is recorded in the open transaction, before the second round
// trip is sent: the answer is the context's error, nothing is recorded,
// and the connection does not go back to the pool inside the transaction.
func TestAtomic_callerWhoLeftBetweenTheRoundTripsIsNeverWritten(t *testing.T) {
	a := newAbandoned(t, 1)
	ctx := t.Context()

	actx, leave := context.WithCancel(ctx)
	defer leave()
	a.gate.WatchReads(func(b []byte) bool {
		if readyInTransaction(b) {
			leave()
			return true
		}
		return false
	})
	firstErr := a.first.Take(actx, "x", line("s", 1))
	want(t, "Take x, left between the round trips", firstErr, context.Canceled)
	// Its session leaves the transaction — rolled back, or ended — and does
	// not sit in the pool holding the ID's lock.
	waitCount(t, a.db, "the first attempt's session is still in its transaction", zero,
		"SELECT COUNT(*) FROM pg_stat_activity WHERE pid = $1 AND state LIKE 'idle in transaction%'", a.pid)
	if _, err := a.repeat.Order(ctx, "x"); !errors.Is(err, stockguard.ErrUnknownOrder) {
		t.Fatalf("Order x: %v, want ErrUnknownOrder", err)
	}
	wantLevels(t, a.repeat, map[string]int64{"s": 1})
	want(t, "Take x, repeated", a.repeat.Take(ctx, "x", line("s", 1)), nil)
	wantLevels(t, a.repeat, map[string]int64{"s": 0})
}

// An order of one line whose caller leaves with the second round trip (the
// stock's UPDATE and COMMIT) sent but held on its way: the answer is
// ErrOutcomeUnknown, and a repeat on another pool waits for the ID, which
// the open transaction holds, and ends agreeing with the record.
func TestAtomic_callerWhoLeftWithTheCommitInFlight_repeatAgrees(t *testing.T) {
	a := newAbandoned(t, 1)
	ctx := t.Context()

	a.gate.HoldAfter(1)
	firstErr := a.leaveHeld(t)
	want(t, "Take x, left with the COMMIT in flight", firstErr, stockguard.ErrOutcomeUnknown)

	repeatDone := make(chan error, 1)
	go func() { repeatDone <- a.repeat.Take(ctx, "x", line("s", 1)) }()
	// The repeat waits for the ID the first attempt's transaction holds.
	waitCount(t, a.db, "the repeat does not wait for the first attempt's ID", func(n int) bool { return n > 0 },
		"SELECT COUNT(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND strpos(query, $1) > 0", OrdersTable(a.table))
	a.gate.Release()
	repeatErr := <-repeatDone
	want(t, "Take x, repeated", repeatErr, nil)
	if !ordersload.RepeatAgrees(t, a.repeat, "x", firstErr, repeatErr) {
		t.Fatal("the order is not recorded")
	}
	wantLevels(t, a.repeat, map[string]int64{"s": 0})
}
