package backends

import (
	"bufio"
	"io"
	"net"
	"strconv"
	"testing"
	"time"
)

// echo serves on a loopback port, writing back every line it reads.
func echo(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				io.Copy(c, c)
			}()
		}
	}()
	return l.Addr().String()
}

// TestDelayedLink_roundTrip checks the lower bound only: a round trip
// through the link takes at least twice its delay, however fast or slow
// the machine; how much longer depends on the load.
func TestDelayedLink_roundTrip(t *testing.T) {
	for _, oneWay := range []time.Duration{0, 100 * time.Microsecond, time.Millisecond, 5 * time.Millisecond} {
		t.Run(oneWay.String(), func(t *testing.T) {
			k, err := NewDelayedLink(echo(t), oneWay)
			if err != nil {
				t.Fatal(err)
			}
			defer k.Close()
			c, err := net.Dial("tcp", k.Addr)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			r := bufio.NewReader(c)
			for i := range 20 {
				begin := time.Now()
				if _, err := c.Write([]byte("ping\n")); err != nil {
					t.Fatal(err)
				}
				line, err := r.ReadString('\n')
				if err != nil {
					t.Fatal(err)
				}
				if took := time.Since(begin); took < 2*oneWay {
					t.Fatalf("round trip %d took %v through a link of %v each way, want at least %v", i, took, oneWay, 2*oneWay)
				}
				if line != "ping\n" {
					t.Fatalf("round trip %d: read %q, want %q", i, line, "ping\n")
				}
			}
		})
	}
}

// TestDelayedLink_pipelined: bytes sent back to back travel together, in
// order — the delay is latency, not a limit of one message per delay.
func TestDelayedLink_pipelined(t *testing.T) {
	const oneWay, n = 2 * time.Millisecond, 200
	k, err := NewDelayedLink(echo(t), oneWay)
	if err != nil {
		t.Fatal(err)
	}
	defer k.Close()
	c, err := net.Dial("tcp", k.Addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	go func() {
		for i := range n {
			c.Write([]byte(strconv.Itoa(i) + "\n"))
		}
	}()
	r := bufio.NewReader(c)
	for i := range n {
		line, err := r.ReadString('\n')
		if err != nil {
			t.Fatal(err)
		}
		if want := strconv.Itoa(i) + "\n"; line != want {
			t.Fatalf("message %d arrived as %q: out of order", i, line)
		}
	}
}

func TestNewDelayedLink_negative(t *testing.T) {
	if k, err := NewDelayedLink("127.0.0.1:1", -time.Millisecond); err == nil {
		k.Close()
		t.Fatal("NewDelayedLink accepted a negative delay")
	}
}
