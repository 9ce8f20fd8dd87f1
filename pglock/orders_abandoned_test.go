package pglock

import (
	"context"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/jmoiron/sqlx"

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
	shut := c.g.shut
	c.g.mu.Unlock()
	if shut {
		c.g.blocked <- struct{}{}
	}
	c.q <- append([]byte(nil), p...)
	return len(p), nil
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
