package netns

import (
	"net"
	"os"
	"runtime"
	"testing"

	"golang.org/x/sys/unix"
)

// listen listens on ServerIP inside the namespace: the socket is made on
// a thread moved into it, and keeps its namespace whatever thread later
// accepts on it.
func (n *NS) listen(t testing.TB) net.Listener {
	t.Helper()
	f, err := os.Open("/var/run/netns/" + n.Name)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	type result struct {
		ln  net.Listener
		err error
	}
	ch := make(chan result, 1)
	go func() {
		// Never unlocked: the thread, still in the namespace, ends with
		// this goroutine instead of running others.
		runtime.LockOSThread()
		if err := unix.Setns(int(f.Fd()), unix.CLONE_NEWNET); err != nil {
			ch <- result{err: err}
			return
		}
		ln, err := net.Listen("tcp", net.JoinHostPort(n.ServerIP, "0"))
		ch <- result{ln, err}
	}()
	r := <-ch
	if r.err != nil {
		t.Fatalf("listen in %s: %v", n.Name, r.err)
	}
	return r.ln
}
