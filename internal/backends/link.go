package backends

import (
	"bytes"
	"errors"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// Link is the network between a Redis node and its peers — its replicas and
// the Sentinels — modelled as a TCP forwarder on loopback: peers reach the
// node through Addr, its clients do not (see Sentinel.Dialer). Cutting the
// link partitions the node from its peers while clients still reach it;
// holding it lags every peer behind the node. A Link made by
// NewDelayedLink also puts a network distance between any client and a
// server. It is safe for concurrent use.
type Link struct {
	// Addr is the node's address as its peers know it: replicas follow it,
	// Sentinels monitor it, and it announces it (replica-announce-port).
	Addr string

	l     net.Listener
	wg    sync.WaitGroup
	delay time.Duration // each byte's least time in transit, each way; set before accept starts

	mu     sync.Mutex
	target string // the node's own address, "" until connect
	pairs  map[*linkPair]struct{}
	cut    bool          // refuse and drop every connection
	hold   chan struct{} // non-nil: the node's bytes wait until it is closed
	closed bool
}

type linkPair struct{ peer, node net.Conn }

func (p *linkPair) close() {
	p.peer.Close()
	p.node.Close()
}

// listenLink listens on a free loopback port; it forwards to the node once
// connect names it (the node announces the link's port, so the link comes
// first).
func listenLink() (*Link, error) { return listenDelayed(0) }

func listenDelayed(delay time.Duration) (*Link, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	k := &Link{Addr: l.Addr().String(), l: l, delay: delay, pairs: map[*linkPair]struct{}{}}
	k.wg.Go(k.accept)
	return k, nil
}

// forwarding counts the goroutines every Link of the process runs for its
// peers' connections.
var forwarding atomic.Int64

// Forwarding returns how many goroutines the process's Links run to
// forward their peers' connections. A leak check leaves them out: they
// belong to the deployment, and a failover changes how many there are —
// the Sentinels reconnect to a restarted node when they get to it, which
// may be during the next run.
func Forwarding() int { return int(forwarding.Load()) }

// NewLink returns a Link that forwards its peers to the node at target.
func NewLink(target string) (*Link, error) {
	k, err := listenLink()
	if err != nil {
		return nil, err
	}
	k.connect(target)
	return k, nil
}

// NewDelayedLink returns a Link that forwards to the server at target and
// delivers every byte, in each direction, no sooner than oneWay after it
// arrived: a round trip through it takes at least 2×oneWay, as across a
// network of that distance, while bytes sent back to back still travel
// together (the delay adds latency, not a limit on throughput). A client
// that connects to Addr rather than target sees the server that far away.
func NewDelayedLink(target string, oneWay time.Duration) (*Link, error) {
	if oneWay < 0 {
		return nil, errors.New("backends: a link's delay cannot be negative")
	}
	k, err := listenDelayed(oneWay)
	if err != nil {
		return nil, err
	}
	k.connect(target)
	return k, nil
}

// connect makes k forward to the node at target.
func (k *Link) connect(target string) {
	k.mu.Lock()
	k.target = target
	k.mu.Unlock()
}

// Cut partitions the node: every peer connection is closed and new ones are
// refused until Heal. Bytes held by Hold are dropped with their
// connections, never delivered.
func (k *Link) Cut() {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.cut = true
	for p := range k.pairs {
		p.close()
	}
	if k.hold != nil {
		close(k.hold)
		k.hold = nil
	}
}

// Heal ends a Cut: peers connect again.
func (k *Link) Heal() {
	k.mu.Lock()
	k.cut = false
	k.mu.Unlock()
}

// Hold stops delivering the node's bytes to its peers — the replication
// stream, replies to the Sentinels' pings — while the peers' bytes still
// reach the node: every replica lags from now on. Release delivers what
// was held; Cut drops it.
func (k *Link) Hold() {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.hold == nil {
		k.hold = make(chan struct{})
	}
}

// Release ends a Hold, delivering what was held.
func (k *Link) Release() {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.hold != nil {
		close(k.hold)
		k.hold = nil
	}
}

// Close stops forwarding and waits for the forwarding goroutines to end.
func (k *Link) Close() error {
	err := k.l.Close()
	k.mu.Lock()
	k.closed = true
	for p := range k.pairs {
		p.close()
	}
	if k.hold != nil {
		close(k.hold)
		k.hold = nil
	}
	k.mu.Unlock()
	k.wg.Wait()
	if errors.Is(err, net.ErrClosed) {
		return nil
	}
	return err
}

func (k *Link) accept() {
	for {
		c, err := k.l.Accept()
		if err != nil {
			return
		}
		k.mu.Lock()
		refuse, target := k.cut || k.closed || k.target == "", k.target
		k.mu.Unlock()
		if refuse {
			c.Close()
			continue
		}
		s, err := net.Dial("tcp", target)
		if err != nil {
			c.Close() // the node is down: its peers see the connection refused
			continue
		}
		p := &linkPair{peer: c, node: s}
		k.mu.Lock()
		if k.cut || k.closed {
			k.mu.Unlock()
			p.close()
			continue
		}
		k.pairs[p] = struct{}{}
		k.mu.Unlock()
		k.wg.Go(func() { k.forward(p) })
	}
}

// held returns the channel to wait on before delivering the node's bytes,
// nil when they may go.
func (k *Link) held() chan struct{} {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.hold
}

func (k *Link) forward(p *linkPair) {
	forwarding.Add(1)
	defer forwarding.Add(-1)
	toPeer, toNode := io.Writer(p.peer), io.Writer(p.node)
	if k.delay > 0 {
		dp, dn := k.delayed(p.peer, p), k.delayed(p.node, p)
		defer dp.close()
		defer dn.close()
		toPeer, toNode = dp, dn
	}
	var wg sync.WaitGroup
	wg.Go(func() {
		forwarding.Add(1)
		defer forwarding.Add(-1)
		defer p.close()
		buf := make([]byte, 32<<10)
		for {
			n, err := p.node.Read(buf)
			if n > 0 {
				if h := k.held(); h != nil {
					<-h
				}
				k.mu.Lock()
				dead := k.cut || k.closed
				k.mu.Unlock()
				if dead {
					return
				}
				if _, err := toPeer.Write(buf[:n]); err != nil {
					return
				}
			}
			if err != nil {
				return
			}
		}
	})
	buf := make([]byte, 32<<10)
	for {
		n, err := p.peer.Read(buf)
		if n > 0 {
			if _, err := toNode.Write(buf[:n]); err != nil {
				break
			}
		}
		if err != nil {
			break
		}
	}
	p.close()
	wg.Wait()
	k.mu.Lock()
	delete(k.pairs, p)
	k.mu.Unlock()
}

// delayedWriter delivers what is written to it to dst, each write no
// sooner than the link's delay after it was made, in order, from a
// goroutine of its own: the writer goes on reading meanwhile, so bytes in
// flight overlap as on a network.
type delayedWriter struct {
	dst   net.Conn
	delay time.Duration
	queue chan delayedChunk
	done  chan struct{} // closed when the delivering goroutine has ended
}

type delayedChunk struct {
	b   []byte
	due time.Time
}

// delayed starts a delayedWriter to dst of pair p; a failed delivery
// closes p, which ends the pair's forwarding.
func (k *Link) delayed(dst net.Conn, p *linkPair) *delayedWriter {
	w := &delayedWriter{dst: dst, delay: k.delay, queue: make(chan delayedChunk, 256), done: make(chan struct{})}
	forwarding.Add(1)
	go func() {
		defer forwarding.Add(-1)
		defer close(w.done)
		sleep := newSleeper()
		defer sleep.close()
		for c := range w.queue {
			sleep.until(c.due)
			if _, err := w.dst.Write(c.b); err != nil {
				p.close()
				return
			}
		}
	}()
	return w
}

func (w *delayedWriter) Write(b []byte) (int, error) {
	select {
	case w.queue <- delayedChunk{b: bytes.Clone(b), due: time.Now().Add(w.delay)}:
		return len(b), nil
	case <-w.done:
		return 0, net.ErrClosed
	}
}

// close stops accepting writes and waits for the delivering goroutine,
// which drops what is queued once its connection is closed.
func (w *delayedWriter) close() {
	close(w.queue)
	<-w.done
}
