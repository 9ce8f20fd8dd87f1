package tiered

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/stockguard/stockguard"
	"github.com/stockguard/stockguard/internal/backends/backendstest"
	"github.com/stockguard/stockguard/internal/must"
	"github.com/stockguard/stockguard/stocktest"
	"github.com/stockguard/stockguard/strategy"
)

// The conformance suites, with a Consumer applying to a MySQL back
// meanwhile: every answer is the front's, whatever the back is doing.
func TestOrders_conformance(t *testing.T) {
	r := newRig(t)
	run(t, r.consumer(nil))
	t.Run("Orders", func(t *testing.T) {
		stocktest.RunOrders(t, func(*testing.T) stockguard.Orders { return must.New(New(r.rdb, r.back, WithPrefix(r.prefix))) })
	})
	t.Run("Inventory", func(t *testing.T) {
		stocktest.Run(t, func(*testing.T) stockguard.Inventory { return must.New(New(r.rdb, r.back, WithPrefix(r.prefix))) })
	})
}

// New and NewConsumer refuse a bad argument or option, returning no
// instance and an error wrapping ErrInvalidRequest, before any I/O.
func TestNew_invalid(t *testing.T) {
	r := newRig(t)
	cc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{"127.0.0.1:1"}})
	t.Cleanup(func() { cc.Close() })
	for name, mk := range map[string]func() (*Orders, error){
		"nil back": func() (*Orders, error) { return New(r.rdb, nil, WithPrefix(r.prefix)) },
		"cluster":  func() (*Orders, error) { return New(cc, r.back) },
		"group":    func() (*Orders, error) { return New(r.rdb, r.back, WithGroup("")) },
		"ack":      func() (*Orders, error) { return New(r.rdb, r.back, WithReplicaAck(0, time.Second)) },
	} {
		if o, err := mk(); o != nil || !errors.Is(err, stockguard.ErrInvalidRequest) {
			t.Errorf("%s: New = %v, %v; want nil and ErrInvalidRequest", name, o, err)
		}
	}
	for name, mk := range map[string]func() (*Consumer, error){
		"nil back":             func() (*Consumer, error) { return NewConsumer(r.rdb, nil, WithPrefix(r.prefix)) },
		"WithBatch(0)":         func() (*Consumer, error) { return NewConsumer(r.rdb, r.back, WithBatch(0)) },
		"WithStopGrace(-1s)":   func() (*Consumer, error) { return NewConsumer(r.rdb, r.back, WithStopGrace(-time.Second)) },
		"WithReplicaAck(1, 0)": func() (*Consumer, error) { return NewConsumer(r.rdb, r.back, WithReplicaAck(1, 0)) },
		"queue, nil back":      func() (*Consumer, error) { return NewQueueConsumer(NewStreams(r.rdb, StreamKey(r.prefix), "g"), nil) },
	} {
		if c, err := mk(); c != nil || !errors.Is(err, stockguard.ErrInvalidRequest) {
			t.Errorf("%s: NewConsumer = %v, %v; want nil and ErrInvalidRequest", name, c, err)
		}
	}
}

// A mixed load from many goroutines ends with the back holding each final
// effect once: orders taken or confirmed are taken there, returned ones
// returned, holds never confirmed unknown, and the levels agree.
func TestConsumer_appliesEachOrderOnce(t *testing.T) {
	r := newRig(t)
	skus := []string{"a", "b", "c", "d"}
	stock(t, r.o, 1000, skus...)
	run(t, r.consumer(nil, WithBatch(16), WithApplyWorkers(8)))
	run(t, r.consumer(nil, WithBatch(16), WithApplyWorkers(8)))

	want := sync.Map{} // id → the back's state at the end (0: unknown)
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(w), 1))
			for i := range 40 {
				id := fmt.Sprintf("w%d-%d", w, i)
				lines := []stockguard.Line{line(skus[rng.IntN(4)], 1+rng.Int64N(3))}
				if s := skus[rng.IntN(4)]; s != lines[0].SKU {
					lines = append(lines, line(s, 1))
				}
				var err error
				var state stockguard.OrderState
				switch rng.IntN(5) {
				case 0:
					err, state = r.o.Take(t.Context(), id, lines...), stockguard.OrderTaken
				case 1:
					if err = r.o.Take(t.Context(), id, lines...); err == nil {
						err, state = r.o.Return(t.Context(), id), stockguard.OrderReturned
					}
				case 2:
					if err = r.o.Hold(t.Context(), id, time.Minute, lines...); err == nil {
						err, state = r.o.Confirm(t.Context(), id), stockguard.OrderTaken
					}
				case 3:
					if err = r.o.Hold(t.Context(), id, time.Minute, lines...); err == nil {
						err = r.o.Return(t.Context(), id)
					}
				case 4:
					err = r.o.Hold(t.Context(), id, time.Millisecond, lines...)
				}
				if err != nil {
					t.Errorf("%s: %v", id, err)
					return
				}
				want.Store(id, state)
			}
		})
	}
	wg.Wait()
	r.settled(t, skus...)
	want.Range(func(k, v any) bool {
		id, state := k.(string), v.(stockguard.OrderState)
		info, err := r.back.Order(t.Context(), id)
		switch {
		case state == 0 && !errors.Is(err, stockguard.ErrUnknownOrder):
			t.Errorf("back has %s, a hold never confirmed: %+v, %v", id, info, err)
		case state != 0 && (err != nil || info.State != state):
			t.Errorf("back: %s = %+v, %v; want state %v", id, info, err, state)
		}
		return true
	})
}

// Restock goes to the back, then the front; a retry adds nothing, an
// order's ID is refused, and the tiers agree.
func TestOrders_Restock_backThenFront(t *testing.T) {
	r := newRig(t)
	stock(t, r.o, 5, "a")
	wantStock(t, "back", r.back, "a", 5)
	for range 2 {
		if err := r.o.Restock(t.Context(), "r1", "a", 3); err != nil {
			t.Fatal(err)
		}
	}
	if err := r.o.Take(t.Context(), "t1", line("a", 1)); err != nil {
		t.Fatal(err)
	}
	if err := r.o.Restock(t.Context(), "t1", "a", 3); !errors.Is(err, stockguard.ErrOrderMismatch) {
		t.Errorf("Restock under an order's ID: %v, want ErrOrderMismatch", err)
	}
	if err := r.o.Restock(t.Context(), "r2", "nope", 3); !errors.Is(err, stockguard.ErrUnknownSKU) {
		t.Errorf("Restock of an unknown SKU: %v", err)
	}
	wantStock(t, "front", r.o, "a", 7)
	wantStock(t, "back before the consumer", r.back, "a", 8)
	run(t, r.consumer(nil))
	r.settled(t, "a")
	wantStock(t, "back", r.back, "a", 7)
}

// The back unreachable for seconds (its connections cut by a proxy): the
// front keeps selling, the backlog grows, and drains once the back is back.
func TestConsumer_backDown_backlogDrains(t *testing.T) {
	r := newRig(t)
	p := newProxy(t, backendstest.SharedMySQL(t).DSN)
	db := p.db(t)
	back := mysqlBack(db, r.table)
	stock(t, r.o, 1000, "a")
	c := r.consumer(back)
	run(t, c)
	take := func(from, to int) {
		for i := from; i < to; i++ {
			if err := r.o.Take(t.Context(), fmt.Sprint("o", i), line("a", 1)); err != nil {
				t.Fatal(err)
			}
		}
	}
	take(0, 20)
	r.drain(t)
	p.down()
	take(20, 220)
	time.Sleep(2 * time.Second)
	left, err := r.q.Backlog(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if len(left) == 0 {
		t.Fatal("the backlog drained with the back down")
	}
	wantStock(t, "front while the back is down", r.o, "a", 780)
	p.up()
	r.settled(t, "a")
	wantStock(t, "back", r.back, "a", 780)
	if s := c.Stats(); s.Applied != 220 {
		t.Errorf("applied %d entries, want 220: %+v", s.Applied, s)
	}
}

// Restock of a SKU the back has and the front lacks is refused for good,
// ErrUnknownSKU, before the back is changed: not ErrOutcomeUnknown, whose
// repetition would never succeed while the back kept the units.
func TestOrders_Restock_skuOnlyOnTheBack_unknownSKU(t *testing.T) {
	r := newRig(t)
	if err := r.back.SetStock(t.Context(), "b", 5); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		err := r.o.Restock(t.Context(), "r1", "b", 3)
		if !errors.Is(err, stockguard.ErrUnknownSKU) || errors.Is(err, stockguard.ErrOutcomeUnknown) {
			t.Errorf("Restock of a SKU the front lacks = %v, want ErrUnknownSKU alone", err)
		}
	}
	wantStock(t, "back", r.back, "b", 5)
}

// SetStock over live holds sets the back to the level plus the units held
// on the front: a hold confirmed later takes them on both tiers, and the
// tiers agree.
func TestOrders_SetStock_overLiveHolds_tiersAgree(t *testing.T) {
	ctx := t.Context()
	r := newRig(t)
	stock(t, r.o, 10, "a")
	if err := r.o.Hold(ctx, "h1", time.Minute, line("a", 3)); err != nil {
		t.Fatal(err)
	}
	if err := r.o.SetStock(ctx, "a", 20); err != nil {
		t.Fatal(err)
	}
	wantStock(t, "back", r.back, "a", 23)
	if err := r.o.Confirm(ctx, "h1"); err != nil {
		t.Fatal(err)
	}
	run(t, r.consumer(nil))
	r.settled(t, "a")
	wantStock(t, "front", r.o, "a", 20)
	wantStock(t, "back", r.back, "a", 20)
}

// A level set right after a Return, near MaxQty, while the Return is still
// on its way to the back (the back counts the returned units as out and
// would refuse the level), and after a Take on its way (applied after the
// back's level, it would leave the back short): SetStock waits for the
// Consumer to apply them and sets both tiers alike.
func TestOrders_SetStock_afterOrdersOnTheirWay_waitsForTheBack(t *testing.T) {
	ctx := t.Context()
	r := newRig(t)
	o := r.o
	c := r.consumer(nil)
	stock(t, o, stockguard.MaxQty, "a")
	if err := o.Take(ctx, "t1", line("a", 10)); err != nil {
		t.Fatal(err)
	}
	r.stepUntilDrained(t, c)
	if err := o.Return(ctx, "t1"); err != nil {
		t.Fatal(err)
	}
	stock(t, o, 100, "b")
	if err := o.Take(ctx, "t2", line("b", 3)); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		err := o.SetStock(ctx, "b", 50)
		if err == nil {
			err = o.SetStock(ctx, "a", stockguard.MaxQty-5)
		}
		done <- err
	}()
	r.stepUntilDrained(t, c)
	if err := <-done; err != nil {
		t.Fatalf("SetStock = %v, want nil once the orders on their way are applied", err)
	}
	r.settled(t, "a", "b")
	wantStock(t, "front", o, "a", stockguard.MaxQty-5)
	wantStock(t, "back", r.back, "a", stockguard.MaxQty-5)
	wantStock(t, "front", o, "b", 50)
	wantStock(t, "back", r.back, "b", 50)
}

// A hold that falls due while SetStock waits for the orders on their way,
// and is given back by a read meanwhile, is counted on the back as it was
// when the front was set: the back's level is the front's plus the units
// held at that instant, and the tiers agree after it.
func TestOrders_SetStock_holdGivenBackWhileItWaits_tiersAgree(t *testing.T) {
	ctx := t.Context()
	r := newRig(t)
	o := r.o
	c := r.consumer(nil)
	stock(t, o, 10, "a")
	if err := o.Hold(ctx, "h1", 300*time.Millisecond, line("a", 1)); err != nil {
		t.Fatal(err)
	}
	if err := o.Take(ctx, "t1", line("a", 2)); err != nil { // on its way: SetStock waits for it
		t.Fatal(err)
	}
	due := time.Now().Add(300 * time.Millisecond)
	done := make(chan error, 1)
	go func() { done <- o.SetStock(ctx, "a", 5) }()
	for { // the front is set: 5 on the shelf, h1's unit out
		var level, held int64
		err := o.call(ctx, "", func(ctx context.Context) (err error) { level, held, err = o.front.Held(ctx, "a"); return err })
		if err != nil {
			t.Fatal(err)
		}
		if level == 5 && held == 1 {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	time.Sleep(time.Until(due) + 50*time.Millisecond)
	wantStock(t, "front, h1 given back", o, "a", 6)
	r.stepUntilDrained(t, c)
	if err := <-done; err != nil {
		t.Fatalf("SetStock = %v", err)
	}
	tiersAgree(t, o, r.back, "a")
	wantStock(t, "back", r.back, "a", 6)
}

// With no Consumer to apply the Return, SetStock gives up when ctx ends:
// the front is set and the back is not, so the answer is ErrOutcomeUnknown,
// never ErrInvalidRequest (which promises that nothing changed).
func TestOrders_SetStock_afterAReturnNobodyApplies_isUnknown(t *testing.T) {
	r := newRig(t)
	o := r.o
	stock(t, o, stockguard.MaxQty, "a")
	if err := o.Take(t.Context(), "t1", line("a", 10)); err != nil {
		t.Fatal(err)
	}
	r.stepUntilDrained(t, r.consumer(nil))
	if err := o.Return(t.Context(), "t1"); err != nil {
		t.Fatal(err)
	}
	// Nothing applies the Return: the deadline only bounds the wait.
	ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
	defer cancel()
	err := o.SetStock(ctx, "a", stockguard.MaxQty-1)
	if !errors.Is(err, stockguard.ErrOutcomeUnknown) || errors.Is(err, stockguard.ErrInvalidRequest) {
		t.Fatalf("SetStock = %v; want ErrOutcomeUnknown, not ErrInvalidRequest", err)
	}
	wantStock(t, "front", o, "a", stockguard.MaxQty-1)
}

// afterBack's answer matches ErrOutcomeUnknown and no other contract
// error: the first tier changed, so a refusal of the second, which promises
// nothing changed, must not be matchable beside it.
func TestAfterBack_oneContractError(t *testing.T) {
	for name, err := range map[string]error{
		"refused":     fmt.Errorf("%w: no room", stockguard.ErrInvalidRequest),
		"unknown SKU": stockguard.ErrUnknownSKU,
		"unavailable": fmt.Errorf("%w: down", stockguard.ErrUnavailable),
		"canceled":    fmt.Errorf("%w: %w", stockguard.ErrUnavailable, context.Canceled),
		"deadline":    context.DeadlineExceeded,
		"unknown":     fmt.Errorf("%w: lost reply", stockguard.ErrOutcomeUnknown),
	} {
		got := afterBack(err, "set %q", "a")
		for _, c := range strategy.ContractErrors() {
			if errors.Is(got, c) != (c == stockguard.ErrOutcomeUnknown) {
				t.Errorf("%s: afterBack(%v) = %v; errors.Is(%v) = %v", name, err, got, c, !(c == stockguard.ErrOutcomeUnknown))
			}
		}
	}
}
