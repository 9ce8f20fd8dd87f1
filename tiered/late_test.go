package tiered

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/stockguard/stockguard"
	"github.com/stockguard/stockguard/internal/backends/backendstest"
	"github.com/stockguard/stockguard/internal/must"
	"github.com/stockguard/stockguard/internal/netgate"
)

// lateRig is a rig whose first Orders sends to the front through a gate,
// and whose repeats go through r.o, on the same keys.
type lateRig struct {
	*rig
	gate  *netgate.Gate
	name  string        // the gated client's connection name
	gated *redis.Client // the first attempts' front client
	first *Orders
}

func newLateRig(t *testing.T) *lateRig {
	t.Helper()
	r := newRig(t)
	run(t, r.consumer(nil))
	gate := netgate.New(t)
	name := "tiered-late-" + strings.ReplaceAll(t.Name(), "/", "-")
	// One connection, and a second's wait for a reply: a held write ends
	// its call as a timeout ends it, with its bytes still on their way.
	gated := redis.NewClient(&redis.Options{Addr: backendstest.SharedRedis(t).Addr, Dialer: gate.Dial,
		ClientName: name, PoolSize: 1, ReadTimeout: time.Second})
	t.Cleanup(func() { gated.Close() })
	l := &lateRig{rig: r, gate: gate, name: name, gated: gated, first: must.New(New(gated, r.back, WithPrefix(r.prefix)))}
	// Reads the epoch, loads the fenced scripts and opens the gated
	// connection, so that a first attempt is one write.
	stock(t, r.o, 1, "warm")
	if err := l.first.Take(t.Context(), "warm", line("warm", 1)); err != nil {
		t.Fatal(err)
	}
	return l
}

// leave runs call (a call of l.first) with the gate shut after pass writes,
// has its caller leave once the gate holds a write, and returns its answer.
func (l *lateRig) leave(t *testing.T, pass int, call func(ctx context.Context) error) error {
	ctx, leave := context.WithCancel(t.Context())
	defer leave()
	done := make(chan error, 1)
	l.gate.HoldAfter(pass)
	go func() { done <- call(ctx) }()
	<-l.gate.Blocked()
	leave()
	return <-done
}

// delivered closes the gated client (its connection ends once it has
// delivered what it holds), releases the gate and waits until Redis has
// no gated connection left: Redis has run all that was held.
func (l *lateRig) delivered(t *testing.T) {
	t.Helper()
	l.gated.Close()
	l.gate.Release()
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		list, err := l.rdb.ClientList(t.Context()).Result()
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(list, " name="+l.name+" ") {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("the gated connection never ended")
		}
	}
}

// onItsWay fails t when an entry of order id is on its way to the back.
func (l *lateRig) onItsWay(t *testing.T, id string) {
	t.Helper()
	left, err := l.q.Backlog(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range left {
		if e.Order == id {
			t.Errorf("entry %+v of order %q is on its way to the back", e, id)
		}
	}
}

// A first Take or Hold on the front whose bytes reach Redis after its
// caller left and after its repeat, on another Orders, was refused is never
// applied: the order is recorded on neither tier, the unit restocked
// meanwhile stays in stock, and a later call under the ID takes it afresh.
func TestOrders_firstAttemptLate_refusedRepeatIsFinal(t *testing.T) {
	for _, c := range []struct {
		name string
		call func(ctx context.Context, o *Orders, id string) error
		want stockguard.OrderState // of the later call under the ID
	}{
		{"Take", func(ctx context.Context, o *Orders, id string) error { return o.Take(ctx, id, line("s", 1)) }, stockguard.OrderTaken},
		{"Hold", func(ctx context.Context, o *Orders, id string) error {
			return o.Hold(ctx, id, time.Minute, line("s", 1))
		}, stockguard.OrderHeld},
	} {
		t.Run(c.name, func(t *testing.T) {
			ctx := t.Context()
			l := newLateRig(t)
			stock(t, l.o, 0, "s")
			err := l.leave(t, 0, func(ctx context.Context) error { return c.call(ctx, l.first, "x") })
			if !errors.Is(err, stockguard.ErrOutcomeUnknown) {
				t.Fatalf("first attempt, caller left: %v, want ErrOutcomeUnknown", err)
			}
			if err := c.call(ctx, l.o, "x"); !errors.Is(err, stockguard.ErrInsufficientStock) {
				t.Fatalf("repeat: %v, want ErrInsufficientStock", err)
			}
			if err := l.o.Restock(ctx, "restock-1", "s", 1); err != nil {
				t.Fatal(err)
			}
			l.delivered(t)
			if info, err := l.o.Order(ctx, "x"); !errors.Is(err, stockguard.ErrUnknownOrder) {
				t.Errorf("front: Order(x) = %+v, %v; want ErrUnknownOrder", info, err)
			}
			wantStock(t, "front", l.o, "s", 1)
			l.onItsWay(t, "x")
			l.settled(t, "s")
			if info, err := l.back.Order(ctx, "x"); !errors.Is(err, stockguard.ErrUnknownOrder) {
				t.Errorf("back: Order(x) = %+v, %v; want ErrUnknownOrder", info, err)
			}
			if err := c.call(ctx, l.o, "x"); err != nil {
				t.Fatalf("a later call under the refused ID: %v, want it applied afresh", err)
			}
			if info, err := l.o.Order(ctx, "x"); err != nil || info.State != c.want {
				t.Errorf("Order(x) = %+v, %v; want %v", info, err, c.want)
			}
			wantStock(t, "front", l.o, "s", 0)
		})
	}
}

// A first Restock, Confirm or Return whose front script reaches Redis
// after its caller left and after a later call on another Orders decided
// the ID changes nothing more: a Restock's record makes the late one a
// retry of the restock its repeat applied; a Confirm meets the hold
// returned since (closed), a Return the order returned already. The unit
// is counted once on each tier, and the tiers agree.
func TestOrders_secondCallLate_changesNothingMore(t *testing.T) {
	for _, c := range []struct {
		name string
		pass int // the writes of the call before its script of the ID
		// before runs on the repeat's Orders before the first attempt;
		// call is the first attempt; after runs on the repeat's Orders
		// while the first is held.
		before, after func(t *testing.T, o *Orders)
		call          func(ctx context.Context, o *Orders) error
		state         stockguard.OrderState // of order "x" at the end; 0: a restock's ID
		front, back   int64                 // the levels of "s" at the end
	}{
		{
			// The front's Order and Stock of the ID, then the back's
			// restock, then the front's: the held one.
			name: "Restock", pass: 2,
			call: func(ctx context.Context, o *Orders) error { return o.Restock(ctx, "x", "s", 1) },
			after: func(t *testing.T, o *Orders) {
				if err := o.Restock(t.Context(), "x", "s", 1); err != nil {
					t.Fatalf("repeat: %v", err)
				}
			},
			front: 2, back: 2,
		},
		{
			// The read of the record, then the Confirm's.
			name: "Confirm", pass: 1,
			before: func(t *testing.T, o *Orders) {
				if err := o.Hold(t.Context(), "x", time.Minute, line("s", 1)); err != nil {
					t.Fatal(err)
				}
			},
			call: func(ctx context.Context, o *Orders) error { return o.Confirm(ctx, "x") },
			after: func(t *testing.T, o *Orders) {
				if err := o.Return(t.Context(), "x"); err != nil {
					t.Fatalf("Return of the hold: %v", err)
				}
			},
			state: stockguard.OrderReturned, front: 1, back: 1,
		},
		{
			name: "Return", pass: 1,
			before: func(t *testing.T, o *Orders) {
				if err := o.Take(t.Context(), "x", line("s", 1)); err != nil {
					t.Fatal(err)
				}
			},
			call: func(ctx context.Context, o *Orders) error { return o.Return(ctx, "x") },
			// The repeat returns the unit, which another order takes: a
			// second return would give it back again.
			after: func(t *testing.T, o *Orders) {
				if err := o.Return(t.Context(), "x"); err != nil {
					t.Fatalf("repeat: %v", err)
				}
				if err := o.Take(t.Context(), "y", line("s", 1)); err != nil {
					t.Fatal(err)
				}
			},
			state: stockguard.OrderReturned, front: 0, back: 0,
		},
	} {
		t.Run(c.name, func(t *testing.T) {
			ctx := t.Context()
			l := newLateRig(t)
			stock(t, l.o, 1, "s")
			if c.before != nil {
				c.before(t, l.o)
			}
			err := l.leave(t, c.pass, func(ctx context.Context) error { return c.call(ctx, l.first) })
			if !errors.Is(err, stockguard.ErrOutcomeUnknown) {
				t.Fatalf("first attempt, caller left: %v, want ErrOutcomeUnknown", err)
			}
			c.after(t, l.o)
			l.delivered(t)
			info, err := l.o.Order(ctx, "x")
			switch {
			case c.state == 0 && !errors.Is(err, stockguard.ErrOrderMismatch):
				t.Errorf("Order(x) = %+v, %v; want ErrOrderMismatch (a restock's ID)", info, err)
			case c.state != 0 && (err != nil || info.State != c.state):
				t.Errorf("Order(x) = %+v, %v; want %v", info, err, c.state)
			}
			l.settled(t, "s")
			wantStock(t, "front", l.o, "s", c.front)
			wantStock(t, "back", l.back, "s", c.back)
		})
	}
}
