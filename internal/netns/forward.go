package netns

import (
	"io"
	"net"
	"sync"
	"testing"
)

// Forwarder takes connections inside the namespace and forwards each to a
// server of the test's own namespace, as a proxy does: from the client's
// side of the link everything is TCP over the veth pair, so what the
// client's kernel holds while the link is cut it retransmits when the
// link heals, and the forwarder passes it on, followed by the client's
// FIN.
type Forwarder struct {
	// Addr is the address to dial instead of the server's.
	Addr string

	mu   sync.Mutex
	open int
}

// Forward forwards the connections to Addr, on the namespace's side of
// the link, to the TCP server at addr. It stops when t ends.
func (n *NS) Forward(t testing.TB, addr string) *Forwarder {
	t.Helper()
	ln := n.listen(t)
	t.Cleanup(func() { ln.Close() })
	f := &Forwarder{Addr: ln.Addr().String()}
	go func() {
		for {
			down, err := ln.Accept()
			if err != nil {
				return
			}
			f.add(1)
			go f.pipe(down, addr)
		}
	}()
	return f
}

// Open returns how many forwarded connections have not ended: a
// connection ends once the client has closed its side and the server has
// answered all it was sent and closed its own.
func (f *Forwarder) Open() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.open
}

func (f *Forwarder) add(d int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.open += d
}

// pipe copies each way until EOF, passing each EOF on as a half close, so
// that the server reads all the client sent before it sees the end.
func (f *Forwarder) pipe(down net.Conn, addr string) {
	defer f.add(-1)
	defer down.Close()
	up, err := net.Dial("tcp", addr)
	if err != nil {
		return
	}
	defer up.Close()
	var wg sync.WaitGroup
	wg.Go(func() {
		io.Copy(up, down)
		up.(*net.TCPConn).CloseWrite()
	})
	io.Copy(down, up)
	down.(*net.TCPConn).CloseWrite()
	wg.Wait()
}
