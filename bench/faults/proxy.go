package faults

import (
	"errors"
	"net"
	"sync"
	"sync/atomic"
)

// Proxy forwards TCP connections from Addr to a server, so that a fault can
// cut them: Cut drops every connection at once, wherever its requests
// stand (idle in a pool, mid-request, mid-reply), and DropReplies lets the
// next requests reach the server but throws their replies away — the
// ambiguous failure a client must report as an unknown outcome. Unlike
// internal/redisx/cutproxy it needs no testing.TB: stockbench uses it too.
// It is safe for concurrent use.
type Proxy struct {
	// Addr is where clients connect instead of the server.
	Addr string

	target string
	l      net.Listener
	drop   atomic.Int64 // replies still to drop
	wg     sync.WaitGroup

	mu     sync.Mutex
	pairs  map[*pair]struct{}
	closed bool
}

// pair is one client connection and its connection to the server.
type pair struct {
	client, server net.Conn
	cut            atomic.Bool // the server's next bytes are a reply to drop
}

func (p *pair) close() {
	p.client.Close()
	p.server.Close()
}

// Listen starts a proxy to target on a free loopback port.
func Listen(target string) (*Proxy, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &Proxy{Addr: l.Addr().String(), target: target, l: l, pairs: map[*pair]struct{}{}}
	p.wg.Go(p.accept)
	return p, nil
}

// Cut closes every open connection and returns how many there were.
// Clients reconnect through the proxy as usual.
func (p *Proxy) Cut() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	for c := range p.pairs {
		c.close()
	}
	return len(p.pairs)
}

// DropReplies makes the proxy deliver the next n requests, from any
// clients, to the server and drop the server's reply to each, closing that
// connection instead.
func (p *Proxy) DropReplies(n int) { p.drop.Store(int64(n)) }

// Open returns the number of connections open through the proxy: zero once
// every client that used it has closed its pool. A nil Proxy (a deployment
// whose clients follow its master, not one address) has none.
func (p *Proxy) Open() int {
	if p == nil {
		return 0
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.pairs)
}

// Close stops accepting, closes every connection and waits for the
// forwarding goroutines to end.
func (p *Proxy) Close() error {
	err := p.l.Close()
	p.mu.Lock()
	p.closed = true
	for c := range p.pairs {
		c.close()
	}
	p.mu.Unlock()
	p.wg.Wait()
	if errors.Is(err, net.ErrClosed) {
		return nil
	}
	return err
}

func (p *Proxy) accept() {
	for {
		c, err := p.l.Accept()
		if err != nil {
			return
		}
		s, err := net.Dial("tcp", p.target)
		if err != nil {
			c.Close() // the server is down: the client sees its connection refused, as it would
			continue
		}
		pr := &pair{client: c, server: s}
		p.mu.Lock()
		if p.closed {
			p.mu.Unlock()
			pr.close()
			return
		}
		p.pairs[pr] = struct{}{}
		p.mu.Unlock()
		p.wg.Go(func() { p.forward(pr) })
	}
}

// forward copies the client's bytes to the server and the server's back
// until either side ends; a request read while replies are to be dropped
// marks the pair, and the server's next bytes — its reply — close both.
func (p *Proxy) forward(pr *pair) {
	var wg sync.WaitGroup
	wg.Go(func() {
		defer pr.close()
		buf := make([]byte, 32<<10)
		for {
			n, err := pr.server.Read(buf)
			if n > 0 && pr.cut.Load() {
				return
			}
			if n > 0 {
				if _, err := pr.client.Write(buf[:n]); err != nil {
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
		n, err := pr.client.Read(buf)
		if n > 0 {
			if p.takeDrop() {
				pr.cut.Store(true)
			}
			if _, err := pr.server.Write(buf[:n]); err != nil {
				break
			}
		}
		if err != nil {
			break
		}
	}
	if !pr.cut.Load() {
		pr.close()
	}
	// A cut request's reply closes the pair when it comes; a server that
	// never answers (paused, killed) is closed by the next Cut or Close.
	wg.Wait()
	p.mu.Lock()
	delete(p.pairs, pr)
	p.mu.Unlock()
}

// takeDrop claims one reply to drop, if any are left.
func (p *Proxy) takeDrop() bool {
	for {
		n := p.drop.Load()
		if n <= 0 {
			return false
		}
		if p.drop.CompareAndSwap(n, n-1) {
			return true
		}
	}
}
