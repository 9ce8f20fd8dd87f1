package netgate

import (
	"context"
	"net"
	"sync"
	"testing"
	"time"
)

// Gate holds the bytes its connections send while it is shut, as a slow
// network does: the client's write returns (the bytes sit in a buffer),
// the server gets them, in order, when the gate opens, and a connection
// the client closes meanwhile still delivers them before it ends.
type Gate struct {
	mu      sync.Mutex
	shut    bool
	open    chan struct{} // closed while the gate is open
	blocked chan struct{}
	pass    int // with armed: writes let through before the gate shuts
	armed   bool
	when    func([]byte) bool // shuts the gate before the first write it matches
	onRead  func([]byte) bool
}

// New returns an open gate, opened for good when t ends.
func New(t testing.TB) *Gate {
	g := &Gate{open: make(chan struct{}), blocked: make(chan struct{}, 64)}
	close(g.open)
	t.Cleanup(g.Release)
	return g
}

// Hold shuts the gate.
func (g *Gate) Hold() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.shutLocked()
}

// HoldAfter lets the next n writes through, then shuts the gate.
func (g *Gate) HoldAfter(n int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.pass, g.armed = n, true
}

// HoldWhen shuts the gate right before the first write match reports
// true for (that write is held with every later one): a test holds a
// transaction's COMMIT on its way while its other statements have run.
func (g *Gate) HoldWhen(match func([]byte) bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.when = match
}

// Release opens the gate: what it holds goes on to the server.
func (g *Gate) Release() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.shut {
		g.shut = false
		close(g.open)
	}
}

// Blocked receives when the shut gate holds a write.
func (g *Gate) Blocked() <-chan struct{} { return g.blocked }

// WatchReads passes what the gate's connections read to fn until it
// returns true.
func (g *Gate) WatchReads(fn func([]byte) bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.onRead = fn
}

func (g *Gate) shutLocked() {
	if !g.shut {
		g.shut, g.open = true, make(chan struct{})
	}
}

// Dial connects to addr through the gate. It fits pgx's
// ConnConfig.DialFunc and go-redis's Options.Dialer; go-sql-driver's
// RegisterDialContext wants it with network "tcp".
func (g *Gate) Dial(ctx context.Context, network, addr string) (net.Conn, error) {
	c, err := (&net.Dialer{}).DialContext(ctx, network, addr)
	if err != nil {
		return nil, err
	}
	gc := &conn{Conn: c, g: g, q: make(chan []byte, 1024)}
	go gc.forward()
	return gc, nil
}

// conn ignores write deadlines: its writes go to a buffer, as to a
// kernel's, and a deadline the client sets when it gives up must not fail
// the delivery of what it already wrote.
type conn struct {
	net.Conn
	g      *Gate
	mu     sync.Mutex // guards closed and sending on q
	q      chan []byte
	closed bool
}

func (c *conn) Write(p []byte) (int, error) {
	g := c.g
	g.mu.Lock()
	if g.armed {
		if g.pass == 0 {
			g.armed = false
			g.shutLocked()
		}
		g.pass--
	}
	if g.when != nil && g.when(p) {
		g.when = nil
		g.shutLocked()
	}
	shut := g.shut
	g.mu.Unlock()
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return 0, net.ErrClosed
	}
	if shut {
		select {
		case g.blocked <- struct{}{}:
		default: // enough signals wait already
		}
	}
	c.q <- append([]byte(nil), p...)
	return len(p), nil
}

func (c *conn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	c.g.mu.Lock()
	defer c.g.mu.Unlock()
	if c.g.onRead != nil && c.g.onRead(p[:n]) {
		c.g.onRead = nil
	}
	return n, err
}

func (c *conn) SetDeadline(t time.Time) error { return c.Conn.SetReadDeadline(t) }

func (c *conn) SetWriteDeadline(time.Time) error { return nil }

// Close lets the connection end once the server has been sent all that
// was written.
func (c *conn) Close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.closed {
		c.closed = true
		close(c.q)
	}
	return nil
}

// forward sends what was written, in order, while the gate is open, and
// closes the connection after the last of it.
func (c *conn) forward() {
	var err error
	for b := range c.q {
		if err != nil {
			continue // drained, so that a writer never waits on a full queue
		}
		c.g.mu.Lock()
		open := c.g.open
		c.g.mu.Unlock()
		<-open
		_, err = c.Conn.Write(b)
	}
	c.Conn.Close()
}
