package netgate

import (
	"bytes"
	"errors"
	"io"
	"net"
	"testing"
	"time"
)

// serve accepts one connection on a loopback listener and runs handle on
// it; it returns the address.
func serve(t *testing.T, handle func(net.Conn)) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		handle(c)
	}()
	return ln.Addr().String()
}

// A held write, and the one behind it, reach the server in order after
// the client closed the connection; a Read under way when it closes
// returns then.
func TestLate_deliversAfterTheClientClosed(t *testing.T) {
	l := NewLate(t, 1, 1, time.Hour)
	holding, release := make(chan struct{}, 1), make(chan struct{})
	l.sleep = func(time.Duration) {
		select {
		case holding <- struct{}{}:
		default:
		}
		<-release
	}
	got := make(chan []byte, 1)
	addr := serve(t, func(c net.Conn) {
		b, _ := io.ReadAll(c)
		got <- b
	})
	c, err := l.Dial(t.Context(), "tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"first ", "second"} {
		if n, err := c.Write([]byte(s)); n != len(s) || err != nil {
			t.Fatalf("Write(%q) = %d, %v", s, n, err)
		}
	}
	<-holding
	read := make(chan error, 1)
	go func() {
		_, err := c.Read(make([]byte, 1))
		read <- err
	}()
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if err := <-read; !errors.Is(err, net.ErrClosed) {
		t.Fatalf("a Read under way at Close returned %v, want net.ErrClosed", err)
	}
	if _, err := c.Write([]byte("third")); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("Write after Close: %v, want net.ErrClosed", err)
	}
	close(release)
	if b := <-got; string(b) != "first second" {
		t.Fatalf("the server got %q, want %q", b, "first second")
	}
	l.Wait()
	if l.Held() != 2 || l.DeliveredLate() != 2 || l.DeliveredAfterClose() != 2 {
		t.Fatalf("held %d, delivered late %d, after close %d; want 2, 2 and 2", l.Held(), l.DeliveredLate(), l.DeliveredAfterClose())
	}
}

// Replies come back in order through a connection some of whose
// requests are held; the share held follows from the seed alone.
func TestLate_roundTripsAndSeed(t *testing.T) {
	held := func(seed uint64) int64 {
		l := NewLate(t, seed, 0.3, time.Millisecond)
		addr := serve(t, func(c net.Conn) { io.Copy(c, c) })
		c, err := l.Dial(t.Context(), "tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		for i := range 100 {
			msg := []byte{byte(i)}
			if _, err := c.Write(msg); err != nil {
				t.Fatal(err)
			}
			got := make([]byte, 1)
			if _, err := io.ReadFull(c, got); err != nil || !bytes.Equal(got, msg) {
				t.Fatalf("round trip %d: got %v, %v", i, got, err)
			}
		}
		return l.Held()
	}
	a, b := held(7), held(7)
	if a != b || a == 0 || a == 100 {
		t.Fatalf("seed 7 held %d, then %d writes of 100: want the same share, some but not all", a, b)
	}
}

// A held write delivered after a Read of its connection timed out (its
// caller left, the client keeps the connection) counts as late, not as
// after close.
func TestLate_deliveredAfterTheCallerLeft(t *testing.T) {
	l := NewLate(t, 1, 1, time.Hour)
	holding, release := make(chan struct{}, 1), make(chan struct{})
	l.sleep = func(time.Duration) {
		holding <- struct{}{}
		<-release
	}
	got := make(chan []byte, 1)
	addr := serve(t, func(c net.Conn) {
		b := make([]byte, 3)
		io.ReadFull(c, b)
		got <- b
	})
	c, err := l.Dial(t.Context(), "tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.Write([]byte("req"))
	<-holding
	c.SetReadDeadline(time.Now())
	var ne net.Error
	if _, err := c.Read(make([]byte, 1)); !errors.As(err, &ne) || !ne.Timeout() {
		t.Fatalf("Read past its deadline: %v, want a timeout", err)
	}
	close(release)
	if b := <-got; string(b) != "req" {
		t.Fatalf("the server got %q", b)
	}
	l.Wait()
	if l.DeliveredLate() != 1 || l.DeliveredAfterClose() != 0 {
		t.Fatalf("delivered late %d, after close %d; want 1 and 0", l.DeliveredLate(), l.DeliveredAfterClose())
	}
}

// A held write that reaches the server after a write made later on
// another connection counts as overtaken.
func TestLate_overtaken(t *testing.T) {
	l := NewLate(t, 1, 1, time.Hour)
	holding, release := make(chan struct{}), make(chan struct{})
	first := true
	l.sleep = func(time.Duration) { // forward goroutines call it one at a time here
		if first {
			first = false
			holding <- struct{}{}
			<-release
		}
	}
	got := make(chan string, 2)
	dial := func() net.Conn {
		addr := serve(t, func(c net.Conn) {
			b := make([]byte, 1)
			io.ReadFull(c, b)
			got <- string(b)
		})
		c, err := l.Dial(t.Context(), "tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	a, b := dial(), dial()
	a.Write([]byte("a"))
	<-holding
	b.Write([]byte("b"))
	if s := <-got; s != "b" {
		t.Fatalf("first delivered %q, want b", s)
	}
	close(release)
	<-got
	l.Wait()
	if l.Held() != 2 || l.Overtaken() != 1 {
		t.Fatalf("held %d, overtaken %d; want 2 and 1", l.Held(), l.Overtaken())
	}
}
