package stocktest_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
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

// byClock are what the clock's violations say: of a call, or of the level
// of a worker's own SKU, set while a hold on it was surely expired.
var byClock = []string{"by the clock", "its only buyer's model allows"}

// Stores broken in what only the checker's models see: its clock, its
// stock model, the contract's word, the input shapes it sends, and its
// horizon. Each runs for a second, a third of the default run, with the
// checker's other defaults (Late where the network holds calls), and must
// be caught every run.
func TestAdversary_catchesWhatOnlyTheModelsSee(t *testing.T) {
	cases := []struct {
		name string
		want string // in some violation, or one of byClock
		adv  stocktest.Adversary
		wrap func(s *memorders.Store) stockguard.Orders
	}{
		// The clock.
		{"holdsExpireEarly", "by the clock", stocktest.Adversary{},
			func(s *memorders.Store) stockguard.Orders { return newSkewedHolds(s, -150*time.Millisecond) }},
		{"holdsOutliveTheirDeadline", "by the clock", stocktest.Adversary{},
			func(s *memorders.Store) stockguard.Orders { return newSkewedHolds(s, 90*time.Millisecond) }},
		{"holdsNeverExpire", "by the clock", stocktest.Adversary{},
			func(s *memorders.Store) stockguard.Orders { return newSkewedHolds(s, 7*24*time.Hour) }},
		// The stock behind a refusal.
		{"busyRowAnsweredSoldOut", "on the shelf", stocktest.Adversary{},
			func(s *memorders.Store) stockguard.Orders { return &busySoldOut{Store: s, c: counter{every: 4}} }},
		{"soldOutAnsweredUnknownSKU", "stocked SKU", stocktest.Adversary{},
			func(s *memorders.Store) stockguard.Orders { return &soldOutUnknown{Store: s} }},
		// The contract's word.
		{"appliedThenNothingChanged", "nothing changed", stocktest.Adversary{},
			func(s *memorders.Store) stockguard.Orders { return &appliedThenNothing{Store: s, c: counter{every: 5}} }},
		// Input shapes.
		{"repeatWithALineDropped", "ErrOrderMismatch", stocktest.Adversary{},
			func(s *memorders.Store) stockguard.Orders { return &droppedLine{Store: s} }},
		{"stockReadCreatesTheSKU", "never stocked", stocktest.Adversary{},
			func(s *memorders.Store) stockguard.Orders { return &creatingRead{Store: s} }},
		{"twoLiveCallsWithOneIDBothApply", "units on open orders", stocktest.Adversary{},
			func(s *memorders.Store) stockguard.Orders { return newRacyID(s) }},
		// The horizon: abandoned placements land after the run's last
		// check, once their repeats were refused.
		{"abandonedAttemptLandsAfterTheRun", "refused, yet recorded", stocktest.Adversary{Late: lateBy + 500*time.Millisecond},
			func(s *memorders.Store) stockguard.Orders { return newLateWire(s) }},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			c.adv.Duration = time.Second
			broken := c.wrap(memorders.New())
			seed, vs := c.adv.CheckOrders(t.Context(), []stockguard.Orders{broken, broken})
			wants := []string{c.want}
			if c.want == byClock[0] {
				wants = byClock
			}
			for _, v := range vs {
				for _, want := range wants {
					if strings.Contains(v.Detail, want) {
						t.Logf("seed %d: caught: %v", seed, v)
						return
					}
				}
			}
			t.Fatalf("seed %d: no violation says %q; got %d: %v", seed, wants, len(vs), vs)
		})
	}
}

func TestAdversary_catchesWhatOnlyTheStockModelSees(t *testing.T) {
	broken := &lastUnitKept{Store: memstock.New()}
	seed, vs := stocktest.Adversary{Duration: time.Second}.CheckInventory(t.Context(), []stockguard.Inventory{broken, broken})
	for _, v := range vs {
		if strings.Contains(v.Detail, "on the shelf") {
			t.Logf("seed %d: caught: %v", seed, v)
			return
		}
	}
	t.Fatalf("seed %d: no violation about units on the shelf; got %d: %v", seed, len(vs), vs)
}

// skewedHolds expires every hold by shift later than the deadline it
// states (earlier, when shift is negative): a reclaim whose clock is off.
type skewedHolds struct {
	*memorders.Store
	mu    sync.Mutex
	shift map[string]time.Duration
	by    time.Duration
}

func newSkewedHolds(s *memorders.Store, by time.Duration) *skewedHolds {
	return &skewedHolds{Store: s, shift: make(map[string]time.Duration), by: by}
}

func (b *skewedHolds) Hold(ctx context.Context, id string, ttl time.Duration, lines ...stockguard.Line) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	_, seen := b.shift[id]
	// As long as a hold may be, and no shorter than a hold may be.
	by := min(max(b.by, time.Millisecond-ttl), 7*24*time.Hour-ttl)
	err := b.Store.Hold(ctx, id, ttl+by, lines...)
	if err == nil && !seen {
		if _, err := b.Store.Order(ctx, id); err == nil {
			b.shift[id] = by
		}
	}
	return err
}

func (b *skewedHolds) Order(ctx context.Context, id string) (stockguard.OrderInfo, error) {
	info, err := b.Store.Order(ctx, id)
	if err == nil && !info.Deadline.IsZero() {
		b.mu.Lock()
		info.Deadline = info.Deadline.Add(-b.shift[id])
		b.mu.Unlock()
	}
	return info, err
}

// busySoldOut answers every n-th new order sold out without trying: a
// busy row taken with NOWAIT, answered as if its units were gone.
type busySoldOut struct {
	*memorders.Store
	c counter
}

func (b *busySoldOut) busy(ctx context.Context, id string, place func() error) error {
	if _, err := b.Store.Order(ctx, id); errors.Is(err, stockguard.ErrUnknownOrder) && b.c.hit() {
		return fmt.Errorf("%w: row busy", stockguard.ErrInsufficientStock)
	}
	return place()
}

func (b *busySoldOut) Take(ctx context.Context, id string, lines ...stockguard.Line) error {
	return b.busy(ctx, id, func() error { return b.Store.Take(ctx, id, lines...) })
}

func (b *busySoldOut) Hold(ctx context.Context, id string, ttl time.Duration, lines ...stockguard.Line) error {
	return b.busy(ctx, id, func() error { return b.Store.Hold(ctx, id, ttl, lines...) })
}

// soldOutUnknown answers a sold-out SKU as never stocked.
type soldOutUnknown struct{ *memorders.Store }

func unknownIfShort(err error) error {
	if errors.Is(err, stockguard.ErrInsufficientStock) {
		return fmt.Errorf("%w: no units", stockguard.ErrUnknownSKU)
	}
	return err
}

func (b *soldOutUnknown) Take(ctx context.Context, id string, lines ...stockguard.Line) error {
	return unknownIfShort(b.Store.Take(ctx, id, lines...))
}

func (b *soldOutUnknown) Hold(ctx context.Context, id string, ttl time.Duration, lines ...stockguard.Line) error {
	return unknownIfShort(b.Store.Hold(ctx, id, ttl, lines...))
}

// appliedThenNothing applies every n-th new order and answers that
// nothing changed: ErrContention, ErrUnavailable or the context's error
// in turn.
type appliedThenNothing struct {
	*memorders.Store
	c counter
	n atomic.Int64
}

func (b *appliedThenNothing) nothing(ctx context.Context, id string, place func() error) error {
	_, err := b.Store.Order(ctx, id)
	fresh := errors.Is(err, stockguard.ErrUnknownOrder)
	if err := place(); err != nil || !fresh || !b.c.hit() {
		return err
	}
	return []error{
		fmt.Errorf("%w: lock not obtained", stockguard.ErrContention),
		fmt.Errorf("%w: read-only", stockguard.ErrUnavailable),
		context.DeadlineExceeded,
	}[b.n.Add(1)%3]
}

func (b *appliedThenNothing) Take(ctx context.Context, id string, lines ...stockguard.Line) error {
	return b.nothing(ctx, id, func() error { return b.Store.Take(ctx, id, lines...) })
}

func (b *appliedThenNothing) Hold(ctx context.Context, id string, ttl time.Duration, lines ...stockguard.Line) error {
	return b.nothing(ctx, id, func() error { return b.Store.Hold(ctx, id, ttl, lines...) })
}

// droppedLine answers a repeat whose cart is the recorded one with lines
// dropped as the same order: it matches lines it finds, not the cart.
type droppedLine struct{ *memorders.Store }

func (b *droppedLine) subset(ctx context.Context, id string, lines []stockguard.Line, place func() error) error {
	info, err := b.Store.Order(ctx, id)
	if err != nil || len(lines) >= len(info.Lines) {
		return place()
	}
	for _, l := range lines {
		if !slices.Contains(info.Lines, l) {
			return place()
		}
	}
	if info.State.Open() {
		return nil
	}
	return fmt.Errorf("%w: %q is %v", stockguard.ErrOrderClosed, id, info.State)
}

func (b *droppedLine) Take(ctx context.Context, id string, lines ...stockguard.Line) error {
	return b.subset(ctx, id, lines, func() error { return b.Store.Take(ctx, id, lines...) })
}

func (b *droppedLine) Hold(ctx context.Context, id string, ttl time.Duration, lines ...stockguard.Line) error {
	return b.subset(ctx, id, lines, func() error { return b.Store.Hold(ctx, id, ttl, lines...) })
}

// creatingRead creates a SKU it is asked to read and does not know, at
// zero units, as an upsert on read would.
type creatingRead struct{ *memorders.Store }

func (b *creatingRead) Stock(ctx context.Context, sku string) (int64, error) {
	n, err := b.Store.Stock(ctx, sku)
	if errors.Is(err, stockguard.ErrUnknownSKU) {
		b.Store.SetStock(ctx, sku, 0)
	}
	return n, err
}

// racyID checks whether an ID is recorded a round trip before it takes,
// outside of what takes: two live calls with one ID that both find it
// free both take the units, and one record is kept.
type racyID struct {
	*memorders.Store
	mu   sync.Mutex
	live map[string]int
}

// raceWindow is the round trip between racyID's check and its take.
const raceWindow = 5 * time.Millisecond

func newRacyID(s *memorders.Store) *racyID { return &racyID{Store: s, live: make(map[string]int)} }

func (b *racyID) racy(ctx context.Context, id string, lines []stockguard.Line, place func() error) error {
	if _, err := b.Store.Order(ctx, id); !errors.Is(err, stockguard.ErrUnknownOrder) {
		return place()
	}
	b.mu.Lock()
	b.live[id]++
	b.mu.Unlock()
	defer func() {
		b.mu.Lock()
		b.live[id]--
		b.mu.Unlock()
	}()
	time.Sleep(raceWindow)
	b.mu.Lock()
	other := b.live[id] > 1
	b.mu.Unlock()
	if err := place(); err != nil || !other {
		return err
	}
	// The other live call found the ID free too: its take is done again.
	for _, l := range lines {
		if err := b.Store.Decrement(ctx, l.SKU, l.Qty); err != nil {
			return nil // sold out: this one stays honest
		}
	}
	return nil
}

func (b *racyID) Take(ctx context.Context, id string, lines ...stockguard.Line) error {
	return b.racy(ctx, id, lines, func() error { return b.Store.Take(ctx, id, lines...) })
}

func (b *racyID) Hold(ctx context.Context, id string, ttl time.Duration, lines ...stockguard.Line) error {
	return b.racy(ctx, id, lines, func() error { return b.Store.Hold(ctx, id, ttl, lines...) })
}

// lastUnitKept never sells a SKU's last units: a Decrement that would
// leave it at zero is refused.
type lastUnitKept struct{ *memstock.Store }

func (b *lastUnitKept) Decrement(ctx context.Context, sku string, qty int64) error {
	if n, err := b.Store.Stock(ctx, sku); err == nil && n == qty {
		return fmt.Errorf("%w: keeps the last", stockguard.ErrInsufficientStock)
	}
	return b.Store.Decrement(ctx, sku, qty)
}

// lateBy is how long lateWire holds a call past its caller's deadline:
// longer than the run, so that the calls it holds land after its last
// check.
const lateBy = 1500 * time.Millisecond

// lateWire is a network that holds every placement whose caller will
// give up (a deadline under a second) past its deadline and delivers it lateBy later, to a store that applies
// whatever arrives: the repeat, refused meanwhile, is overtaken by the
// attempt its caller left.
type lateWire struct {
	*memorders.Store
	held atomic.Int64
}

func newLateWire(s *memorders.Store) *lateWire { return &lateWire{Store: s} }

func (w *lateWire) send(ctx context.Context, call func(ctx context.Context) error) error {
	if err := strategy.Canceled(ctx); err != nil {
		return err
	}
	if dl, ok := ctx.Deadline(); !ok || time.Until(dl) > time.Second {
		return call(ctx)
	}
	w.held.Add(1)
	<-ctx.Done()
	go func() {
		time.Sleep(lateBy)
		call(context.Background())
	}()
	return errors.Join(stockguard.ErrOutcomeUnknown, ctx.Err())
}

func (w *lateWire) Take(ctx context.Context, id string, lines ...stockguard.Line) error {
	return w.send(ctx, func(ctx context.Context) error { return w.Store.Take(ctx, id, lines...) })
}

func (w *lateWire) Hold(ctx context.Context, id string, ttl time.Duration, lines ...stockguard.Line) error {
	return w.send(ctx, func(ctx context.Context) error { return w.Store.Hold(ctx, id, ttl, lines...) })
}
