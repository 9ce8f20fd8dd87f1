package combinetest

import (
	"testing"
	"time"
)

// Queues is what the helpers read of a combine.Combiner.
type Queues interface {
	Pending(key string) int
	Busy() int
}

// Queued waits until key's queue in c exists and holds n requests: 0
// means a drainer has taken them all.
func Queued(t testing.TB, c Queues, key string, n int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		got := c.Pending(key)
		if got == n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d requests queued for %q, want %d", got, key, n)
		}
		time.Sleep(time.Millisecond)
	}
}

// Idle waits until c has no queue left: drainers remove them when done.
func Idle(t testing.TB, c Queues) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		n := c.Busy()
		if n == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d queues left after every request returned", n)
		}
		time.Sleep(time.Millisecond)
	}
}
