package netgate

import (
	"context"
	crand "crypto/rand"
	"encoding/binary"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// DialFunc dials a connection, as net.Dialer.DialContext does; it is the
// shape of pgx's ConnConfig.DialFunc and go-redis's Options.Dialer.
type DialFunc func(ctx context.Context, network, addr string) (net.Conn, error)

// envSeed is stocktest.EnvAdversarySeed: a Late whose seed is zero takes
// the seed an adversary run is repeated with, so that one variable
// repeats both the workload and the network's choices.
const envSeed = "STOCKGUARD_ADVERSARY_SEED"

// Late is a network that holds a random share of what its connections
// send and delivers it later: the client's write returns at once (the
// bytes sit in a buffer, as in a kernel's), and a held write, with every
// later write of its connection (TCP keeps their order), reaches the
// server after a random delay of up to Max — also when the client has
// given up and closed the connection meanwhile, as a kernel retransmits
// what it buffered or a proxy forwards what it accepted. Replies come
// back as they are sent, to a client that may have left.
//
// Its choices (which writes, how long) follow from its seed: the n-th
// write of the k-th connection dialled gets the same hold in every run
// with that seed; when the writes happen is up to the machine.
type Late struct {
	seed  uint64
	share float64
	max   time.Duration
	sleep func(time.Duration) // time.Sleep; tests hold a write as long as they need

	dialled    atomic.Uint64
	held       atomic.Int64
	overtaken  atomic.Int64
	late       atomic.Int64
	afterClose atomic.Int64
	sent       atomic.Uint64 // numbers the writes in the order the clients made them
	delivered  atomic.Uint64 // the highest number delivered

	mu      sync.Mutex
	pending int           // writes not yet delivered, and connections closed but not ended
	idle    chan struct{} // closed when pending falls to zero
}

// NewLate returns a network that holds share (0 to 1) of the writes for a
// random delay of up to maxHold. A zero seed is STOCKGUARD_ADVERSARY_SEED if
// set, else random; the seed is logged. When t ends, after the cleanups
// registered later (the clients' Close), it waits until everything
// written has been delivered and every connection its client closed has
// ended.
func NewLate(t testing.TB, seed uint64, share float64, maxHold time.Duration) *Late {
	t.Helper()
	if maxHold <= 0 || share <= 0 || share > 1 {
		t.Fatalf("netgate.NewLate: want share in (0, 1] and maxHold > 0, got %v and %v", share, maxHold)
	}
	if seed == 0 {
		if s := os.Getenv(envSeed); s != "" {
			var err error
			if seed, err = strconv.ParseUint(s, 10, 64); err != nil {
				t.Fatalf("%s=%q: %v", envSeed, s, err)
			}
		}
	}
	for seed == 0 {
		var b [8]byte
		crand.Read(b[:])
		seed = binary.LittleEndian.Uint64(b[:]) >> 1
	}
	l := &Late{seed: seed, share: share, max: maxHold, sleep: time.Sleep}
	t.Logf("netgate: late network, seed %d, %.0f%% of writes held up to %v", seed, 100*share, maxHold)
	t.Cleanup(l.Wait)
	return l
}

// Seed returns the seed of l's choices.
func (l *Late) Seed() uint64 { return l.seed }

// Max returns the longest l holds a write: every write reaches the server
// at most Max after the client wrote it (and the time the machine takes
// to deliver it).
func (l *Late) Max() time.Duration { return l.max }

// Held returns how many writes l chose to hold (not counting those that
// waited only behind an earlier held write).
func (l *Late) Held() int64 { return l.held.Load() }

// Overtaken returns how many writes reached the server after a write
// made later on another connection had: the reordering by which a
// repeat, sent after its caller gave up, gets ahead of the attempt it
// repeats.
func (l *Late) Overtaken() int64 { return l.overtaken.Load() }

// DeliveredLate returns how many writes reached the server after their
// client had given up on the connection: a Read of it had failed (its
// deadline passed: the caller left) or the client had closed it.
func (l *Late) DeliveredLate() int64 { return l.late.Load() }

// DeliveredAfterClose returns how many writes reached the server after
// their client had closed the connection.
func (l *Late) DeliveredAfterClose() int64 { return l.afterClose.Load() }

// Dial connects to addr through l, as DialVia does with a plain
// net.Dialer. go-sql-driver's RegisterDialContext wants it with network
// "tcp".
func (l *Late) Dial(ctx context.Context, network, addr string) (net.Conn, error) {
	var d net.Dialer
	return l.DialVia(d.DialContext)(ctx, network, addr)
}

// DialVia returns a DialFunc that connects with dial and puts each
// connection behind l.
func (l *Late) DialVia(dial DialFunc) DialFunc {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := dial(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		k := l.dialled.Add(1)
		lc := &lateConn{Conn: c, l: l, rnd: rand.New(rand.NewPCG(l.seed, k)), q: make(chan lateWrite, 1024)}
		go lc.forward()
		return lc, nil
	}
}

// Wait returns once every write l took has reached the server (or its
// connection failed) and every connection whose client closed it has
// ended.
func (l *Late) Wait() {
	l.mu.Lock()
	if l.pending == 0 {
		l.mu.Unlock()
		return
	}
	if l.idle == nil {
		l.idle = make(chan struct{})
	}
	idle := l.idle
	l.mu.Unlock()
	<-idle
}

// deliver counts a write made as seq-th reaching the server. A later
// write delivered before it was one of another connection's: a
// connection delivers in order.
func (l *Late) deliver(seq uint64) {
	for {
		hi := l.delivered.Load()
		if hi > seq {
			l.overtaken.Add(1)
			return
		}
		if l.delivered.CompareAndSwap(hi, seq) {
			return
		}
	}
}

func (l *Late) begin() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.pending++
}

func (l *Late) end() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.pending--
	if l.pending == 0 && l.idle != nil {
		close(l.idle)
		l.idle = nil
	}
}

// drainLimit bounds how long a connection its client closed waits for
// the server to end it after the last write was delivered.
const drainLimit = 10 * time.Second

type lateWrite struct {
	b   []byte
	at  time.Time // when it may reach the server
	seq uint64    // Late.sent when it was made
}

// lateConn ignores write deadlines, as conn does: its writes go to a
// buffer, and a deadline the client sets when it gives up must not fail
// the delivery of what it already wrote.
type lateConn struct {
	net.Conn
	l *Late

	// rd is held for reading by the client's Reads under way, and for
	// writing by forward once the client has closed: then what the
	// server answers is read and dropped.
	rd sync.RWMutex

	mu     sync.Mutex // guards rnd and last, and sending on q and closing it
	rnd    *rand.Rand
	last   time.Time // when the latest write may reach the server
	q      chan lateWrite
	closed atomic.Bool // set under mu; read without it by forward, which must not wait for a Write blocked on a full q
	gaveUp atomic.Bool // a Read failed, or the client closed
}

func (c *lateConn) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed.Load() {
		return 0, net.ErrClosed
	}
	at := time.Now()
	if c.rnd.Float64() < c.l.share {
		at = at.Add(1 + time.Duration(c.rnd.Int64N(int64(c.l.max))))
		c.l.held.Add(1)
	}
	if at.Before(c.last) {
		at = c.last // behind a held write: TCP delivers in order
	}
	c.last = at
	c.l.begin()
	c.q <- lateWrite{b: append([]byte(nil), p...), at: at, seq: c.l.sent.Add(1)}
	return len(p), nil
}

func (c *lateConn) Read(p []byte) (int, error) {
	c.rd.RLock()
	defer c.rd.RUnlock()
	if c.isClosed() {
		return 0, net.ErrClosed
	}
	n, err := c.Conn.Read(p)
	if err != nil {
		c.gaveUp.Store(true)
		if c.isClosed() {
			err = net.ErrClosed // woken by Close's deadline
		}
	}
	return n, err
}

func (c *lateConn) isClosed() bool { return c.closed.Load() }

func (c *lateConn) SetDeadline(t time.Time) error { return c.SetReadDeadline(t) }

func (c *lateConn) SetReadDeadline(t time.Time) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed.Load() {
		return net.ErrClosed
	}
	return c.Conn.SetReadDeadline(t)
}

func (c *lateConn) SetWriteDeadline(time.Time) error { return nil }

// Close returns at once; the connection ends once the server has been
// sent all that was written and has closed its side.
func (c *lateConn) Close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed.Load() {
		return nil
	}
	c.closed.Store(true)
	c.gaveUp.Store(true)
	c.Conn.SetReadDeadline(time.Unix(1, 0)) // a Read under way returns now
	c.l.begin()                             // the connection's end, counted by forward
	close(c.q)
	return nil
}

// forward sends what was written, in order, each write when its time
// comes; once the client has closed and all is sent, it ends the
// connection as a kernel does: a FIN after the data, the server's answers
// read and dropped until it closes too.
func (c *lateConn) forward() {
	var err error
	for w := range c.q {
		if err == nil {
			if d := time.Until(w.at); d > 0 {
				c.l.sleep(d)
			}
			// Counted as it is handed to the server's connection, so that
			// a server that has the bytes finds them counted.
			if c.gaveUp.Load() {
				c.l.late.Add(1)
			}
			if c.isClosed() {
				c.l.afterClose.Add(1)
			}
			c.l.deliver(w.seq)
			_, err = c.Conn.Write(w.b)
		}
		c.l.end()
	}
	c.rd.Lock() // the client's last Reads have returned
	defer c.rd.Unlock()
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok && err == nil && cw.CloseWrite() == nil {
		c.Conn.SetReadDeadline(time.Now().Add(drainLimit))
		io.Copy(io.Discard, c.Conn) // until the server closes, resets, or drainLimit passes
	}
	c.Conn.Close()
	c.l.end()
}

// The network of the adversarial checker's runs over real stores: a tenth
// of the writes held, each up to AdversarialMax, past most of the
// checker's short deadlines (at most 30 ms) and well inside a run.
const (
	AdversarialShare = 0.1
	AdversarialMax   = 100 * time.Millisecond
)

// Adversarial returns the network of an adversarial run: NewLate with
// AdversarialShare and AdversarialMax, its seed STOCKGUARD_ADVERSARY_SEED
// if set. Give the run Seed: l.Seed() (one variable then repeats both)
// and Late: l.Max().
func Adversarial(t testing.TB) *Late {
	t.Helper()
	return NewLate(t, 0, AdversarialShare, AdversarialMax)
}

// Check waits as Wait does, logs l's counters and fails t unless l held
// some writes and some reached the server after writes made later on
// other connections: a run in which nothing was overtaken tested nothing
// of what l is for. (Whether a held write outlived its caller only the
// caller knows: a client that keeps the connection, waiting for the
// answer in the background, gives no sign of it.)
func (l *Late) Check(t testing.TB) {
	t.Helper()
	l.Wait()
	t.Logf("netgate: %d connections, %d writes held, %d overtaken, %d delivered after their client gave up on the connection (%d after it closed)",
		l.dialled.Load(), l.Held(), l.Overtaken(), l.DeliveredLate(), l.DeliveredAfterClose())
	if l.Held() == 0 || l.Overtaken() == 0 {
		t.Errorf("netgate: the late network (seed %d) held %d writes, %d overtaken by later ones: the run did not test late delivery",
			l.seed, l.Held(), l.Overtaken())
	}
}
