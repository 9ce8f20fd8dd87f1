package stocktest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stockguard/stockguard"
)

// The store an Inventory run works on: SKUs that only Decrement takes
// from, stocked once and sold out during the run, a fresh generation of
// them every advDecEvery so that decrements keep finding units, one SKU
// per worker that only it sets, and one per worker that only it
// decrements and sets, whose level the model knows.
const (
	advDecSKUs    = 4
	advDecInitial = 120
	advDecEvery   = 250 * time.Millisecond
)

// RunInventory runs the adversary's Inventory workload against insts,
// instances of one store, and reports every violation as an error of t,
// with the seed. Decrements, a share of them abandoned, take from SKUs
// stocked once: per SKU the units gone must lie between the units
// acknowledged and those plus the units of every ErrOutcomeUnknown
// answer, never below zero, and a Stock read while they run must lie
// between what was acknowledged before it and what was asked by its end.
// SetStock and Stock run meanwhile on other SKUs, each written by one
// worker, which reads back exactly what it set. Each worker also sells
// out a SKU of its own, refilled with SetStock, whose level the model
// knows: a refusal while it had the units, an acknowledgement while it
// had not, or a Stock outside its bounds is a violation. A Decrement or a
// Stock of a SKU never stocked must be ErrUnknownSKU and create nothing.
// After the workers stop, the run waits Late before its last checks.
func (a Adversary) RunInventory(t *testing.T, insts []stockguard.Inventory) {
	t.Helper()
	cfg, err := a.withDefaults()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("adversary seed %d, %v, %d workers, %d instances, late %v", cfg.Seed, cfg.Duration, cfg.Workers, len(insts), cfg.Late)
	vs, summary := cfg.checkInventory(t.Context(), insts)
	t.Logf("adversary: %s", summary)
	report(t, cfg, vs)
}

// CheckInventory is RunInventory returning the violations (nil: none) and
// the seed it ran, instead of reporting to a test.
func (a Adversary) CheckInventory(ctx context.Context, insts []stockguard.Inventory) (uint64, []Violation) {
	cfg, err := a.withDefaults()
	if err != nil {
		return 0, []Violation{{Case: "Adversary", Detail: err.Error()}}
	}
	vs, _ := cfg.checkInventory(ctx, insts)
	return cfg.Seed, vs
}

// decSKU is the account of one SKU only Decrement takes from.
type decSKU struct {
	name    string
	asked   atomic.Int64 // units of every Decrement begun
	acked   atomic.Int64 // units of every Decrement answered nil
	unknown atomic.Int64 // units of every Decrement answered ErrOutcomeUnknown
}

type inventoryRun struct {
	cfg   adversary
	insts []stockguard.Inventory
	skus  []*decSKU                 // every generation
	gen   atomic.Pointer[[]*decSKU] // the generation decrements take from
	ghost string                    // never stocked
	vs    violations
	stats struct{ calls, abandoned, unknown, refused atomic.Int64 }
}

func (a adversary) checkInventory(ctx context.Context, insts []stockguard.Inventory) ([]Violation, string) {
	if len(insts) == 0 {
		return []Violation{{Case: "Adversary", Detail: "no instances"}}, ""
	}
	tag := runTag()
	r := &inventoryRun{cfg: a, insts: insts, ghost: "adv-ghost~" + tag}
	generation := func(g int) error {
		var gen []*decSKU
		for i := range advDecSKUs {
			s := &decSKU{name: fmt.Sprintf("adv-dec-%d-%d~%s", g, i, tag)}
			if err := insts[0].SetStock(ctx, s.name, advDecInitial); err != nil {
				return fmt.Errorf("SetStock(%q): %w", s.name, err)
			}
			gen = append(gen, s)
		}
		r.skus = append(r.skus, gen...)
		r.gen.Store(&gen)
		return nil
	}
	if err := generation(0); err != nil {
		return []Violation{{Case: "Adversary", Detail: err.Error()}}, ""
	}
	type setter struct {
		caller
		sku   string
		level int64
		own   ownLevel
	}
	var setters []*setter
	for w := range a.Workers {
		s := &setter{caller: newCaller(ctx, a.Seed, w, len(insts)), sku: fmt.Sprintf("adv-set-%d~%s", w, tag)}
		s.level = int64(s.rng.IntN(1000))
		s.own = ownLevel{prefix: fmt.Sprintf("adv-own-%d~%s", w, tag), lo: advOwnInitial, hi: advOwnInitial}
		s.own.sku = s.own.prefix
		for sku, level := range map[string]int64{s.sku: s.level, s.own.sku: advOwnInitial} {
			if err := insts[0].SetStock(ctx, sku, level); err != nil {
				return []Violation{{Case: "Adversary", Detail: fmt.Sprintf("SetStock(%q): %v", sku, err)}}, ""
			}
		}
		setters = append(setters, s)
	}
	end := time.Now().Add(a.Duration)
	var wg sync.WaitGroup
	for _, s := range setters {
		wg.Go(func() {
			for time.Now().Before(end) && ctx.Err() == nil {
				p := s.rng.IntN(100)
				switch {
				case p < 50:
					gen := *r.gen.Load()
					r.decrement(&s.caller, gen[s.rng.IntN(len(gen))])
				case p < 72:
					r.decrementOwn(&s.caller, &s.own)
				case p < 75:
					r.decrementGhost(&s.caller)
				case p < 78:
					r.readGhost(&s.caller)
				case p < 88:
					gen := *r.gen.Load()
					r.readDec(&s.caller, gen[s.rng.IntN(len(gen))])
				case p < 94:
					level := int64(s.rng.IntN(1000))
					a := s.patiently(func(ctx context.Context, i int) error { return r.insts[i].SetStock(ctx, s.sku, level) })
					if a.err != nil {
						r.fail(ctx, "SetStock(%q, %d) answered %s", s.sku, level, answer(a.err))
						continue
					}
					s.level = level
				default:
					var got int64
					a := s.patiently(func(ctx context.Context, i int) error {
						var err error
						got, err = r.insts[i].Stock(ctx, s.sku)
						return err
					})
					if a.err != nil || got != s.level {
						r.fail(ctx, "Stock(%q) = %d, %s; its only writer set %d", s.sku, got, answer(a.err), s.level)
					}
				}
			}
		})
	}
	for g := 1; time.Now().Add(advDecEvery).Before(end) && ctx.Err() == nil; g++ {
		time.Sleep(advDecEvery)
		if err := generation(g); err != nil {
			r.fail(ctx, "%v", err)
			break
		}
	}
	wg.Wait()
	if a.Late > 0 && ctx.Err() == nil {
		// The horizon: every attempt the network held has landed.
		select {
		case <-time.After(a.Late):
		case <-ctx.Done():
		}
	}
	if ctx.Err() != nil {
		r.vs.add("the test ended before the run did: %v", ctx.Err())
		return r.vs.list(), ""
	}
	for _, s := range setters {
		if s.own.lo == s.own.hi {
			r.readOwn(&s.caller, &s.own)
		}
	}
	for _, s := range r.skus {
		got, err := insts[0].Stock(ctx, s.name)
		if err != nil {
			r.vs.add("Stock(%q) at the end: %s", s.name, answer(err))
			continue
		}
		gone, acked, unknown := advDecInitial-got, s.acked.Load(), s.unknown.Load()
		if got < 0 || gone < acked || gone > acked+unknown {
			r.vs.add("SKU %q: %d units gone (Stock %d of %d), but %d acknowledged and %d unknown: want %d…%d gone and Stock ≥ 0",
				s.name, gone, got, advDecInitial, acked, unknown, acked, acked+unknown)
		}
	}
	if _, err := insts[0].Stock(ctx, r.ghost); !errors.Is(err, stockguard.ErrUnknownSKU) {
		r.vs.add("Stock(%q), never stocked, only decremented: %s, want %s", r.ghost, answer(err), stockguard.ErrUnknownSKU)
	}
	st := &r.stats
	return r.vs.list(), fmt.Sprintf("%d calls, %d abandoned, %d unknown, %d refused", st.calls.Load(), st.abandoned.Load(), st.unknown.Load(), st.refused.Load())
}

func (r *inventoryRun) fail(ctx context.Context, format string, args ...any) {
	if ctx.Err() == nil {
		r.vs.add(format, args...)
	}
}

// decrement takes 1–3 units of s, perhaps giving up early, and accounts
// for the answer. Decrement is not idempotent: an abandoned one is not
// repeated, its units count as unknown.
func (r *inventoryRun) decrement(c *caller, s *decSKU) {
	qty := 1 + int64(c.rng.IntN(3))
	a := attempt{inst: c.rng.IntN(c.n), deadline: c.deadline(0)}
	if a.deadline != patient {
		r.stats.abandoned.Add(1)
	}
	ctx, cancel := context.WithTimeout(c.ctx, a.deadline)
	s.asked.Add(qty)
	a.err = r.insts[a.inst].Decrement(ctx, s.name, qty)
	cancel()
	r.stats.calls.Add(1)
	switch {
	case a.err == nil:
		s.acked.Add(qty)
	case errors.Is(a.err, stockguard.ErrOutcomeUnknown):
		r.stats.unknown.Add(1)
		s.unknown.Add(qty)
	case errors.Is(a.err, stockguard.ErrInsufficientStock):
		r.stats.refused.Add(1)
	case errors.Is(a.err, stockguard.ErrContention),
		errors.Is(a.err, stockguard.ErrUnavailable),
		errors.Is(a.err, context.DeadlineExceeded),
		errors.Is(a.err, context.Canceled):
		// Nothing was taken.
	default:
		r.fail(c.ctx, "Decrement(%q, %d) on %v", s.name, qty, a)
	}
}

// decrementGhost decrements a SKU never stocked: ErrUnknownSKU, or no
// definite answer, and never a unit taken or a SKU created.
func (r *inventoryRun) decrementGhost(c *caller) {
	a := attempt{inst: c.rng.IntN(c.n), deadline: c.deadline(0)}
	ctx, cancel := context.WithTimeout(c.ctx, a.deadline)
	a.err = r.insts[a.inst].Decrement(ctx, r.ghost, 1)
	cancel()
	r.stats.calls.Add(1)
	if definite(a.err) && !errors.Is(a.err, stockguard.ErrUnknownSKU) {
		r.fail(c.ctx, "Decrement(%q, 1) of a SKU never stocked on %v, want %s", r.ghost, a, stockguard.ErrUnknownSKU)
	}
}

// readDec reads s while others decrement it: the units gone are at least
// those acknowledged before the read and at most those asked by its end.
func (r *inventoryRun) readDec(c *caller, s *decSKU) {
	low := s.acked.Load()
	var got int64
	a := c.patiently(func(ctx context.Context, i int) error {
		var err error
		got, err = r.insts[i].Stock(ctx, s.name)
		return err
	})
	high := s.asked.Load()
	r.stats.calls.Add(1)
	gone := advDecInitial - got
	if a.err != nil || got < 0 || gone < low || gone > high {
		r.fail(c.ctx, "Stock(%q) = %d, %s while decrements run: want %d…%d units gone and Stock ≥ 0", s.name, got, answer(a.err), low, high)
	}
}

// ownLevel is a SKU one worker alone decrements and sets: its level lies
// in lo…hi. A Decrement answered ErrOutcomeUnknown may land at any time
// after, so that the level is no longer known: the worker moves on to a
// fresh SKU (gen counts them).
type ownLevel struct {
	sku    string
	prefix string
	gen    int
	lo, hi int64
}

// decrementOwn takes 1–3 units of the worker's own SKU, perhaps giving up
// early, refilling it first when it is sold out, and checks the answer
// against the level the model knows.
func (r *inventoryRun) decrementOwn(c *caller, s *ownLevel) {
	if s.lo != s.hi {
		s.gen++
		s.sku, s.hi = fmt.Sprintf("%s-%d", s.prefix, s.gen), 0
	}
	if s.hi == 0 {
		level := 1 + int64(c.rng.IntN(2*advOwnInitial))
		a := c.patiently(func(ctx context.Context, i int) error { return r.insts[i].SetStock(ctx, s.sku, level) })
		if a.err != nil {
			r.fail(c.ctx, "SetStock(%q, %d) answered %s", s.sku, level, answer(a.err))
			return
		}
		s.lo, s.hi = level, level
	}
	qty := 1 + int64(c.rng.IntN(3))
	a := attempt{inst: c.rng.IntN(c.n), deadline: c.deadline(0)}
	ctx, cancel := context.WithTimeout(c.ctx, a.deadline)
	a.err = r.insts[a.inst].Decrement(ctx, s.sku, qty)
	cancel()
	r.stats.calls.Add(1)
	switch {
	case a.err == nil:
		if s.hi < qty {
			r.fail(c.ctx, "Decrement(%q, %d) on %v, but its only buyer left it %d…%d units", s.sku, qty, a, s.lo, s.hi)
		}
		s.lo, s.hi = max(s.lo-qty, 0), max(s.hi-qty, 0)
	case errors.Is(a.err, stockguard.ErrOutcomeUnknown):
		r.stats.unknown.Add(1)
		s.lo = max(s.lo-qty, 0)
	case errors.Is(a.err, stockguard.ErrInsufficientStock):
		r.stats.refused.Add(1)
		if s.lo >= qty {
			r.fail(c.ctx, "Decrement(%q, %d) refused (%v) with the units on the shelf: its only buyer left it %d…%d", s.sku, qty, a, s.lo, s.hi)
		}
		s.hi = min(s.hi, qty-1)
	case nothingChanged(a.err):
	default:
		r.fail(c.ctx, "Decrement(%q, %d) on %v", s.sku, qty, a)
	}
}

// readOwn reads the worker's own SKU: its level must lie where the model
// says, and is exact from then on.
func (r *inventoryRun) readOwn(c *caller, s *ownLevel) {
	var got int64
	a := c.patiently(func(ctx context.Context, i int) error {
		var err error
		got, err = r.insts[i].Stock(ctx, s.sku)
		return err
	})
	r.stats.calls.Add(1)
	if a.err != nil || got < s.lo || got > s.hi {
		r.fail(c.ctx, "Stock(%q) = %d, %s; its only buyer left it %d…%d units", s.sku, got, answer(a.err), s.lo, s.hi)
		return
	}
	s.lo, s.hi = got, got
}

// readGhost reads a SKU never stocked: ErrUnknownSKU, and nothing created.
func (r *inventoryRun) readGhost(c *caller) {
	a := c.patiently(func(ctx context.Context, i int) error {
		_, err := r.insts[i].Stock(ctx, r.ghost)
		return err
	})
	r.stats.calls.Add(1)
	if !errors.Is(a.err, stockguard.ErrUnknownSKU) {
		r.fail(c.ctx, "Stock(%q) of a SKU never stocked on %v, want %s", r.ghost, a, stockguard.ErrUnknownSKU)
	}
}
