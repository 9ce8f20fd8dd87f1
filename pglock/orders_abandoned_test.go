package pglock

import (
	"bytes"
	"context"
	"errors"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/jmoiron/sqlx"

	"github.com/stockguard/stockguard"
	"github.com/stockguard/stockguard/internal/backends/backendstest"
	"github.com/stockguard/stockguard/internal/must"
	"github.com/stockguard/stockguard/internal/ordersload"
)

// gate holds the bytes a pool's connections send while it is shut, as a
// slow network does: the client's write returns (the bytes sit in a
// buffer), the server gets them when the gate opens, and a connection the
// client closes meanwhile still delivers them first.
type gate struct {
	mu      sync.Mutex
	shut    bool
	open    chan struct{} // closed while the gate is open
	blocked chan struct{} // receives when a write is held
	pass    int           // with armed: writes let through before the gate shuts
	armed   bool
	onRead  func([]byte) bool // sees what a connection reads until it returns true
}

func newGate(t *testing.T) *gate {
	g := &gate{open: make(chan struct{}), blocked: make(chan struct{}, 64)}
	close(g.open)
	t.Cleanup(g.release)
	return g
}

func (g *gate) hold() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.shutLocked()
}

// holdAfter lets the next n writes through, then shuts the gate.
func (g *gate) holdAfter(n int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.pass, g.armed = n, true
}

// watchReads passes what connections read to fn until it returns true.
func (g *gate) watchReads(fn func([]byte) bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.onRead = fn
}

func (g *gate) shutLocked() {
	if !g.shut {
		g.shut, g.open = true, make(chan struct{})
	}
}

func (g *gate) release() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.shut {
		g.shut = false
		close(g.open)
	}
}

// db opens a pool of one connection on the shared server through g.
func (g *gate) db(t *testing.T) *sqlx.DB {
	cfg, err := pgx.ParseConfig(backendstest.SharedPostgres(t).DSN)
	if err != nil {
		t.Fatal(err)
	}
	cfg.DialFunc = func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := (&net.Dialer{}).DialContext(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		gc := &gatedConn{Conn: c, g: g, q: make(chan []byte, 1024)}
		go gc.forward()
		return gc, nil
	}
	db := sqlx.NewDb(stdlib.OpenDB(*cfg), "pgx")
	db.SetMaxOpenConns(1)
	t.Cleanup(func() { db.Close() })
	return db
}

type gatedConn struct {
	net.Conn
	g     *gate
	q     chan []byte
	close sync.Once
}

func (c *gatedConn) Write(p []byte) (int, error) {
	c.g.mu.Lock()
	if c.g.armed {
		if c.g.pass == 0 {
			c.g.armed = false
			c.g.shutLocked()
		}
		c.g.pass--
	}
	shut := c.g.shut
	c.g.mu.Unlock()
	if shut {
		c.g.blocked <- struct{}{}
	}
	c.q <- append([]byte(nil), p...)
	return len(p), nil
}

func (c *gatedConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	c.g.mu.Lock()
	defer c.g.mu.Unlock()
	if c.g.onRead != nil && c.g.onRead(p[:n]) {
		c.g.onRead = nil
	}
	return n, err
}

// forward sends what was written, in order, when the gate is open, and
// closes the connection after the last of it.
func (c *gatedConn) forward() {
	for b := range c.q {
		c.g.mu.Lock()
		open := c.g.open
		c.g.mu.Unlock()
		<-open
		if _, err := c.Conn.Write(b); err != nil {
			break
		}
	}
	c.Conn.Close()
}

func (c *gatedConn) Close() error {
	c.close.Do(func() { close(c.q) })
	return nil
}

// An order of one line whose statement is sent but held on its way to the
// server while its caller leaves; the repeat, on another pool, finds no
// order and no units and is refused; then a restock, and the held bytes
// reach the server: the order must not be recorded after all.
func TestAtomic_callerWhoLeftBeforeItsIDWasRecordedIsNeverWritten(t *testing.T) {
	g := newGate(t)
	gated := g.db(t)
	db := testDB(t)
	table := newTable(t, db)
	first := must.New(NewAtomic(gated, WithTable(table)))
	repeat := must.New(NewAtomic(db, WithTable(table)))
	ctx := t.Context()
	want(t, "SetStock s", repeat.SetStock(ctx, "s", 0), nil)
	want(t, "SetStock z", repeat.SetStock(ctx, "z", 1), nil)
	// The gated connection is set up, its statements prepared.
	want(t, "Take warm", first.Take(ctx, "warm", line("z", 1)), nil)
	var pid int
	if err := gated.GetContext(ctx, &pid, "SELECT pg_backend_pid()"); err != nil {
		t.Fatal(err)
	}

	g.hold()
	actx, leave := context.WithCancel(ctx)
	firstDone := make(chan error, 1)
	go func() { firstDone <- first.Take(actx, "x", line("s", 1)) }()
	<-g.blocked
	leave()
	firstErr := <-firstDone
	repeatErr := repeat.Take(ctx, "x", line("s", 1))
	want(t, "SetStock s", repeat.SetStock(ctx, "s", 1), nil)
	g.release()
	// The first attempt's connection ends once the server has read all it
	// was sent.
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		var n int
		if err := db.GetContext(ctx, &n, "SELECT COUNT(*) FROM pg_stat_activity WHERE pid = $1", pid); err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the first attempt's connection is still there")
		}
	}
	ordersload.RepeatAgrees(t, repeat, "x", firstErr, repeatErr)
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
	g := newGate(t)
	gated := g.db(t)
	db := testDB(t)
	table := newTable(t, db)
	first := must.New(NewAtomic(gated, WithTable(table)))
	repeat := must.New(NewAtomic(db, WithTable(table)))
	ctx := t.Context()
	want(t, "SetStock s", repeat.SetStock(ctx, "s", 1), nil)
	want(t, "SetStock z", repeat.SetStock(ctx, "z", 1), nil)
	want(t, "Take warm", first.Take(ctx, "warm", line("z", 1)), nil)
	var pid int
	if err := gated.GetContext(ctx, &pid, "SELECT pg_backend_pid()"); err != nil {
		t.Fatal(err)
	}

	actx, leave := context.WithCancel(ctx)
	defer leave()
	g.watchReads(func(b []byte) bool {
		if readyInTransaction(b) {
			leave()
			return true
		}
		return false
	})
	firstErr := first.Take(actx, "x", line("s", 1))
	want(t, "Take x, left between the round trips", firstErr, context.Canceled)
	// Its session leaves the transaction — rolled back, or ended — and does
	// not sit in the pool holding the ID's lock.
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		var n int
		if err := db.GetContext(ctx, &n, "SELECT COUNT(*) FROM pg_stat_activity WHERE pid = $1 AND state LIKE 'idle in transaction%'", pid); err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the first attempt's session is still in its transaction")
		}
	}
	if _, err := repeat.Order(ctx, "x"); !errors.Is(err, stockguard.ErrUnknownOrder) {
		t.Fatalf("Order x: %v, want ErrUnknownOrder", err)
	}
	wantLevels(t, repeat, map[string]int64{"s": 1})
	want(t, "Take x, repeated", repeat.Take(ctx, "x", line("s", 1)), nil)
	wantLevels(t, repeat, map[string]int64{"s": 0})
}

// An order of one line whose caller leaves with the second round trip (the
// stock's UPDATE and COMMIT) sent but held on its way: the answer is
// ErrOutcomeUnknown, and a repeat on another pool waits for the ID, which
// the open transaction holds, and ends agreeing with the record.
func TestAtomic_callerWhoLeftWithTheCommitInFlight_repeatAgrees(t *testing.T) {
	g := newGate(t)
	gated := g.db(t)
	db := testDB(t)
	table := newTable(t, db)
	first := must.New(NewAtomic(gated, WithTable(table)))
	repeat := must.New(NewAtomic(db, WithTable(table)))
	ctx := t.Context()
	want(t, "SetStock s", repeat.SetStock(ctx, "s", 1), nil)
	want(t, "SetStock z", repeat.SetStock(ctx, "z", 1), nil)
	// The gated connection is set up, its statements prepared: each round
	// trip is one write.
	want(t, "Take warm", first.Take(ctx, "warm", line("z", 1)), nil)

	g.holdAfter(1)
	actx, leave := context.WithCancel(ctx)
	firstDone := make(chan error, 1)
	go func() { firstDone <- first.Take(actx, "x", line("s", 1)) }()
	<-g.blocked
	leave()
	firstErr := <-firstDone
	want(t, "Take x, left with the COMMIT in flight", firstErr, stockguard.ErrOutcomeUnknown)

	repeatDone := make(chan error, 1)
	go func() { repeatDone <- repeat.Take(ctx, "x", line("s", 1)) }()
	// The repeat waits for the ID the first attempt's transaction holds.
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		var n int
		err := db.GetContext(ctx, &n, "SELECT COUNT(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND strpos(query, $1) > 0", OrdersTable(table))
		if err != nil {
			t.Fatal(err)
		}
		if n > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the repeat does not wait for the first attempt's ID")
		}
	}
	g.release()
	repeatErr := <-repeatDone
	want(t, "Take x, repeated", repeatErr, nil)
	if !ordersload.RepeatAgrees(t, repeat, "x", firstErr, repeatErr) {
		t.Fatal("the order is not recorded")
	}
	wantLevels(t, repeat, map[string]int64{"s": 0})
}
