// Package cutproxy is a TCP proxy for fault tests that can lose the reply to one request after the server has handled it.
package cutproxy

import (
	"net"
	"sync"
	"sync/atomic"
	"testing"
)

// Proxy forwards connections to a target address. After CutNextReply, the
// next request any client sends is delivered, the server's reply to it is
// read and thrown away, and both connections are closed: the client sees the
// connection drop after its request was applied — the ambiguous failure a
// client must report as "outcome unknown". It is safe for concurrent use.
type Proxy struct {
	// Addr is where clients connect instead of the target.
	Addr string

	target string
	l      net.Listener
	armed  atomic.Bool
	wg     sync.WaitGroup

	mu    sync.Mutex
	conns map[net.Conn]struct{}
}

// Start listens on a free loopback port and forwards to target until tb ends.
func Start(tb testing.TB, target string) *Proxy {
	tb.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	p := &Proxy{Addr: l.Addr().String(), target: target, l: l, conns: map[net.Conn]struct{}{}}
	p.wg.Go(p.accept)
	tb.Cleanup(p.close)
	return p
}

// CutNextReply arms the proxy: the reply to the next request is lost.
func (p *Proxy) CutNextReply() { p.armed.Store(true) }

func (p *Proxy) accept() {
	for {
		c, err := p.l.Accept()
		if err != nil {
			return
		}
		s, err := net.Dial("tcp", p.target)
		if err != nil {
			c.Close()
			continue
		}
		if !p.track(c, s) {
			return
		}
		p.wg.Go(func() { p.pipe(c, s) })
	}
}

// track registers a connection pair for close; false once closing.
func (p *Proxy) track(c, s net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.conns == nil {
		c.Close()
		s.Close()
		return false
	}
	p.conns[c], p.conns[s] = struct{}{}, struct{}{}
	return true
}

// pipe copies client c to server s and back. A request read while the proxy
// is armed marks the pair cut; the server's next bytes are then its reply to
// that request, which is dropped along with both connections.
func (p *Proxy) pipe(c, s net.Conn) {
	var cut atomic.Bool
	var wg sync.WaitGroup
	wg.Go(func() {
		defer c.Close()
		buf := make([]byte, 64<<10)
		for {
			n, err := s.Read(buf)
			if n > 0 && cut.Load() {
				s.Close()
				return
			}
			if n > 0 {
				if _, werr := c.Write(buf[:n]); werr != nil {
					return
				}
			}
			if err != nil {
				return
			}
		}
	})
	buf := make([]byte, 64<<10)
	for {
		n, err := c.Read(buf)
		if n > 0 {
			if p.armed.CompareAndSwap(true, false) {
				cut.Store(true)
			}
			if _, werr := s.Write(buf[:n]); werr != nil {
				break
			}
		}
		if err != nil {
			break
		}
	}
	// The client is gone (or the pair was cut); a server still working on a
	// cut request must be allowed to answer first, so only half-close.
	if tc, ok := s.(*net.TCPConn); ok && !cut.Load() {
		tc.CloseWrite()
	}
	wg.Wait()
	s.Close()
	p.mu.Lock()
	delete(p.conns, c)
	delete(p.conns, s)
	p.mu.Unlock()
}

func (p *Proxy) close() {
	p.l.Close()
	p.mu.Lock()
	for c := range p.conns {
		c.Close()
	}
	p.conns = nil
	p.mu.Unlock()
	p.wg.Wait()
}
