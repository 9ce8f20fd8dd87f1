package stocktest_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stockguard/stockguard"
	"github.com/stockguard/stockguard/internal/memorders"
	"github.com/stockguard/stockguard/internal/memstock"
	"github.com/stockguard/stockguard/stocktest"
	"github.com/stockguard/stockguard/strategy"
)

// The reference passes, with every instance the same store.
func TestAdversary_memorders(t *testing.T) {
	store := memorders.New()
	stocktest.Adversary{Duration: time.Second}.RunOrders(t, []stockguard.Orders{store, store, store})
}

// The reference behind a wire that delays every order call and lets its
// caller give up while the call goes on (ErrOutcomeUnknown), keeping the
// ID busy until it ends, as a correct remote store must: abandoned calls
// land after their callers left, and the checker still finds nothing.
// (Every instance goes through the one wire: an instance that bypassed it
// would let a repeat overtake its abandoned attempt.)
func TestAdversary_memordersOverWire(t *testing.T) {
	store := memorders.New()
	w := newWire(store)
	stocktest.Adversary{Duration: time.Second}.RunOrders(t, []stockguard.Orders{w, w})
	if w.late.Load() == 0 {
		t.Fatal("no call landed after its caller gave up: the wire did not test what it is for")
	}
}

func TestAdversary_memstock(t *testing.T) {
	store := memstock.New()
	stocktest.Adversary{Duration: time.Second}.RunInventory(t, []stockguard.Inventory{store, store})
}

func TestAdversary_memordersInventory(t *testing.T) {
	store := memorders.New()
	stocktest.Adversary{Duration: time.Second}.RunInventory(t, []stockguard.Inventory{store, newWire(store)})
}

func TestAdversary_seedFromEnvironment(t *testing.T) {
	t.Setenv(stocktest.EnvAdversarySeed, "424242")
	store := memorders.New()
	seed, vs := stocktest.Adversary{Duration: 50 * time.Millisecond}.CheckOrders(t.Context(), []stockguard.Orders{store})
	if seed != 424242 || len(vs) > 0 {
		t.Fatalf("seed %d, violations %v; want seed 424242 and none", seed, vs)
	}
	t.Setenv(stocktest.EnvAdversary, "soon")
	if _, vs := (stocktest.Adversary{}).CheckOrders(t.Context(), []stockguard.Orders{store}); len(vs) != 1 || !strings.Contains(vs[0].Detail, stocktest.EnvAdversary) {
		t.Fatalf("violations %v, want one naming %s", vs, stocktest.EnvAdversary)
	}
}

// Each broken store breaks the contract on every n-th call of one kind,
// by a counter: the checker must find it in every run.
func TestAdversary_catchesBrokenOrders(t *testing.T) {
	cases := []struct {
		name string
		want string // in some violation
		wrap func(s *memorders.Store) stockguard.Orders
	}{
		{"refusedYetRecorded", "refused, yet recorded", func(s *memorders.Store) stockguard.Orders { return &phantomRefusal{Store: s, c: counter{every: 3}} }},
		{"doubleTakeOnRepeat", "off by", func(s *memorders.Store) stockguard.Orders { return &doubleTake{Store: s, c: counter{every: 2}} }},
		{"lostReturn", "but Order says taken", func(s *memorders.Store) stockguard.Orders { return &lostReturn{Store: s, c: counter{every: 2}} }},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			broken := c.wrap(memorders.New())
			seed, vs := stocktest.Adversary{Duration: time.Second}.CheckOrders(t.Context(), []stockguard.Orders{broken, broken})
			for _, v := range vs {
				if strings.Contains(v.Detail, c.want) {
					t.Logf("seed %d: caught: %v", seed, v)
					return
				}
			}
			t.Fatalf("seed %d: no violation says %q; got %d: %v", seed, c.want, len(vs), vs)
		})
	}
}

func TestAdversary_catchesBrokenInventory(t *testing.T) {
	cases := []struct {
		name string
		wrap func(s *memstock.Store) stockguard.Inventory
	}{
		{"lostDecrement", func(s *memstock.Store) stockguard.Inventory { return &lostDecrement{Store: s, c: counter{every: 5}} }},
		{"refusedYetTaken", func(s *memstock.Store) stockguard.Inventory { return &refusedYetTaken{Store: s, c: counter{every: 5}} }},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			broken := c.wrap(memstock.New())
			seed, vs := stocktest.Adversary{Duration: 300 * time.Millisecond}.CheckInventory(t.Context(), []stockguard.Inventory{broken, broken})
			for _, v := range vs {
				if strings.Contains(v.Detail, "units gone") {
					t.Logf("seed %d: caught: %v", seed, v)
					return
				}
			}
			t.Fatalf("seed %d: no violation about units gone; got %v", seed, vs)
		})
	}
}

// counter counts calls of one kind and says which ones to break.
type counter struct {
	mu    sync.Mutex
	n     int
	every int
}

func (c *counter) hit() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.n++
	return c.n%c.every == 0
}

// phantomRefusal takes every n-th new order and answers that it was sold
// out: refused, yet recorded.
type phantomRefusal struct {
	*memorders.Store
	c counter
}

func (b *phantomRefusal) phantom(ctx context.Context, id string, place func() error) error {
	if _, err := b.Store.Order(ctx, id); !errors.Is(err, stockguard.ErrUnknownOrder) || !b.c.hit() {
		return place()
	}
	if err := place(); err != nil {
		return err
	}
	return fmt.Errorf("%w: phantom", stockguard.ErrInsufficientStock)
}

func (b *phantomRefusal) Take(ctx context.Context, id string, lines ...stockguard.Line) error {
	return b.phantom(ctx, id, func() error { return b.Store.Take(ctx, id, lines...) })
}

func (b *phantomRefusal) Hold(ctx context.Context, id string, ttl time.Duration, lines ...stockguard.Line) error {
	return b.phantom(ctx, id, func() error { return b.Store.Hold(ctx, id, ttl, lines...) })
}

// doubleTake takes the units again on every n-th repeat of an open order
// with its own cart.
type doubleTake struct {
	*memorders.Store
	c counter
}

func (b *doubleTake) again(ctx context.Context, id string, lines []stockguard.Line, place func() error) error {
	info, err := b.Store.Order(ctx, id)
	repeat := err == nil && info.State.Open() && len(info.Lines) == len(lines)
	if err := place(); err != nil || !repeat || !b.c.hit() {
		return err
	}
	for _, l := range lines {
		b.Store.Decrement(ctx, l.SKU, l.Qty) // sold out: this repeat stays honest
	}
	return nil
}

func (b *doubleTake) Take(ctx context.Context, id string, lines ...stockguard.Line) error {
	return b.again(ctx, id, lines, func() error { return b.Store.Take(ctx, id, lines...) })
}

func (b *doubleTake) Hold(ctx context.Context, id string, ttl time.Duration, lines ...stockguard.Line) error {
	return b.again(ctx, id, lines, func() error { return b.Store.Hold(ctx, id, ttl, lines...) })
}

// lostReturn answers nil to every n-th Return of a taken order and leaves
// it taken.
type lostReturn struct {
	*memorders.Store
	c counter
}

func (b *lostReturn) Return(ctx context.Context, id string) error {
	if info, err := b.Store.Order(ctx, id); err == nil && info.State == stockguard.OrderTaken && b.c.hit() {
		return nil
	}
	return b.Store.Return(ctx, id)
}

// lostDecrement answers nil to every n-th Decrement and takes nothing.
type lostDecrement struct {
	*memstock.Store
	c counter
}

func (b *lostDecrement) Decrement(ctx context.Context, sku string, qty int64) error {
	if b.c.hit() {
		return nil
	}
	return b.Store.Decrement(ctx, sku, qty)
}

// refusedYetTaken takes on every n-th Decrement and answers sold out.
type refusedYetTaken struct {
	*memstock.Store
	c counter
}

func (b *refusedYetTaken) Decrement(ctx context.Context, sku string, qty int64) error {
	if err := b.Store.Decrement(ctx, sku, qty); err != nil || !b.c.hit() {
		return err
	}
	return fmt.Errorf("%w: phantom", stockguard.ErrInsufficientStock)
}

// wire puts the order calls of a Store behind a simulated network: each
// is sent after a delay its caller may not wait for. A caller that gives
// up gets ErrOutcomeUnknown and the call goes on; the next call with its
// ID waits until it ended, so abandoned calls never overtake.
type wire struct {
	*memorders.Store
	mu    sync.Mutex
	busy  map[string]chan struct{}
	n     int
	late  atomic.Int64
	delay []time.Duration
}

func newWire(s *memorders.Store) *wire {
	return &wire{Store: s, busy: make(map[string]chan struct{}),
		delay: []time.Duration{0, 50 * time.Microsecond, 500 * time.Microsecond, 3 * time.Millisecond}}
}

func (w *wire) send(ctx context.Context, id string, call func(ctx context.Context) error) error {
	if err := strategy.Canceled(ctx); err != nil {
		return err
	}
	w.mu.Lock()
	sem, ok := w.busy[id]
	if !ok {
		sem = make(chan struct{}, 1)
		w.busy[id] = sem
	}
	w.n++
	delay := w.delay[w.n%len(w.delay)]
	w.mu.Unlock()
	select {
	case sem <- struct{}{}:
	case <-ctx.Done():
		return ctx.Err() // nothing sent
	}
	done := make(chan error, 1)
	go func() {
		defer func() { <-sem }()
		time.Sleep(delay)
		done <- call(context.Background())
	}()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		go func() {
			<-done
			w.late.Add(1)
		}()
		return errors.Join(stockguard.ErrOutcomeUnknown, ctx.Err())
	}
}

func (w *wire) Take(ctx context.Context, id string, lines ...stockguard.Line) error {
	if err := strategy.ValidateTake(id, lines); err != nil {
		return err
	}
	return w.send(ctx, id, func(ctx context.Context) error { return w.Store.Take(ctx, id, lines...) })
}

func (w *wire) Hold(ctx context.Context, id string, ttl time.Duration, lines ...stockguard.Line) error {
	if err := strategy.ValidateHold(id, ttl, lines); err != nil {
		return err
	}
	return w.send(ctx, id, func(ctx context.Context) error { return w.Store.Hold(ctx, id, ttl, lines...) })
}

func (w *wire) Confirm(ctx context.Context, id string) error {
	return w.send(ctx, id, func(ctx context.Context) error { return w.Store.Confirm(ctx, id) })
}

func (w *wire) Return(ctx context.Context, id string) error {
	return w.send(ctx, id, func(ctx context.Context) error { return w.Store.Return(ctx, id) })
}

func (w *wire) Restock(ctx context.Context, id, sku string, qty int64) error {
	return w.send(ctx, id, func(ctx context.Context) error { return w.Store.Restock(ctx, id, sku, qty) })
}

func (w *wire) Decrement(ctx context.Context, sku string, qty int64) error {
	if err := strategy.Validate(sku, qty); err != nil {
		return err
	}
	return w.send(ctx, "\x00decrement", func(ctx context.Context) error { return w.Store.Decrement(ctx, sku, qty) })
}
