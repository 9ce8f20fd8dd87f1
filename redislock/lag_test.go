package redislock

import (
	"context"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stockguard/stockguard/internal/backends"
	"github.com/stockguard/stockguard/internal/backends/backendstest"
)

// laggingReplicated starts a master and one replica that receives the
// replication stream, and sends its acknowledgements, through a proxy
// delaying every chunk by lag: a replica that is always lag behind, as
// over a slow link, so that a read from it right after a write the master
// alone acknowledged misses that write.
func laggingReplicated(t *testing.T, lag time.Duration) *backends.Replicated {
	t.Helper()
	master := backendstest.PrivateRedis(t, 1, "--repl-diskless-sync-delay", "0")[0]
	proxy := startDelayProxy(t, master.Addr, lag)
	host, port, _ := strings.Cut(proxy, ":")
	replica := backendstest.PrivateRedis(t, 1, "--replicaof", host, port)[0]
	r := &backends.Replicated{Master: master, Replicas: []*backends.Redis{replica}}
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	if err := r.WaitSynced(ctx); err != nil {
		t.Fatal(err)
	}
	return r
}

// startDelayProxy forwards connections to target, each direction's bytes
// delayed by lag, in order, until t ends. It returns its address.
func startDelayProxy(t *testing.T, target string, lag time.Duration) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var (
		mu    sync.Mutex
		conns []net.Conn
		wg    sync.WaitGroup
	)
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			s, err := net.Dial("tcp", target)
			if err != nil {
				c.Close()
				continue
			}
			mu.Lock()
			conns = append(conns, c, s)
			mu.Unlock()
			wg.Go(func() { delayCopy(s, c, lag) })
			wg.Go(func() { delayCopy(c, s, lag) })
		}
	})
	return ln.Addr().String()
}

// delayCopy copies src to dst, each chunk lag after it was read.
func delayCopy(dst, src net.Conn, lag time.Duration) {
	type chunk struct {
		b  []byte
		at time.Time
	}
	ch := make(chan chunk, 4096)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for c := range ch {
			time.Sleep(time.Until(c.at))
			if _, err := dst.Write(c.b); err != nil {
				return
			}
		}
	}()
	buf := make([]byte, 64<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			ch <- chunk{append([]byte(nil), buf[:n]...), time.Now().Add(lag)}
		}
		if err != nil {
			close(ch)
			<-done
			dst.Close()
			return
		}
	}
}
