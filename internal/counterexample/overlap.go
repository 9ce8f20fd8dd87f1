package counterexample

import (
	"context"
	"sync"
	"sync/atomic"
	"time"
)

// overlap makes a pattern's race happen on every run instead of whenever
// the scheduler allows: at a named point of the pattern (inside its
// critical section, or inside its lock's window), the first request on a
// SKU waits for a second request to reach the same point. A sound lock
// never lets the second one in, so the first proceeds alone after
// meetWait; a broken one does, and the two read the same level. On a
// loaded machine two requests may otherwise never overlap, and a
// counterexample that is not caught proves nothing about the audit.
type overlap struct {
	store  string // "" while not forced
	across bool   // only requests of two instances can meet (see forceAcross)
}

// meetWait bounds the wait for a second request: far above the time any of
// the patterns needs to let one in (their leases are milliseconds), so
// that a loaded machine cannot make the meeting miss.
const meetWait = 10 * time.Second

// meetings holds one meeting per store, point and SKU; instances counts,
// per store, the instances forced with forceAcross in this process.
var meetings, instances sync.Map

type meeting struct {
	mu      sync.Mutex
	arrived int
	met     chan struct{}
}

// force makes the first two requests of every SKU of store meet.
func (o *overlap) force(store string) { o.store = store }

// forceAcross is force for a pattern sound within one instance: its
// requests meet only while this process has two instances of store or
// more, since one instance's second request can never arrive (and the
// first would wait meetWait for nothing). Instances in other processes
// cannot meet it: across processes the race is left to the scheduler.
func (o *overlap) forceAcross(store string) {
	o.force(store)
	o.across = true
	n, _ := instances.LoadOrStore(store, new(atomic.Int64))
	n.(*atomic.Int64).Add(1)
}

// meet waits, for the first request on sku to reach point, until a second
// one reaches it too, meetWait passes or ctx ends; later requests pass.
func (o overlap) meet(ctx context.Context, point, sku string) {
	if o.store == "" {
		return
	}
	if o.across {
		if n, _ := instances.Load(o.store); n.(*atomic.Int64).Load() < 2 {
			return
		}
	}
	v, _ := meetings.LoadOrStore(o.store+"\x00"+point+"\x00"+sku, &meeting{met: make(chan struct{})})
	m := v.(*meeting)
	m.mu.Lock()
	m.arrived++
	n := m.arrived
	if n == 2 {
		close(m.met)
	}
	m.mu.Unlock()
	if n > 1 {
		return
	}
	t := time.NewTimer(meetWait)
	defer t.Stop()
	select {
	case <-m.met:
	case <-t.C:
	case <-ctx.Done():
	}
}
