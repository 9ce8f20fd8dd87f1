package stocktest

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"time"

	"github.com/stockguard/stockguard"
	"github.com/stockguard/stockguard/strategy"
)

// The concurrency case's size: teams of concTeam goroutines each make the
// same concSteps calls with the same IDs and arguments, as clients retrying
// one checkout concurrently would, over concSKUs SKUs of concStock units.
// The stock is small enough that some orders are refused and the returns
// and expiries of others matter.
const (
	concTeam     = 4
	concSteps    = 16
	concSKUs     = 8
	concStock    = 60
	concMaxLines = 5
	concMaxQty   = 3
	// concMaxStrays bounds the violations the goroutines report, so that a
	// broken implementation yields a readable list.
	concMaxStrays = 20
)

// concOrder is one order, hold or restock of a team's plan, and what the
// team's calls were told about it.
type concOrder struct {
	id      string
	restock bool
	hold    bool
	ttl     time.Duration // holds only
	lines   []stockguard.Line
	confirm bool // the plan confirms it
	ret     bool // the plan returns it

	mu        sync.Mutex
	placed    bool      // a Take, Hold or Restock returned nil, or found it closed: it was applied
	confirmed bool      // a Confirm returned nil
	returned  bool      // a Return returned nil
	expires   time.Time // latest deadline a nil Hold can have set
}

// short reports whether the order is a hold left to expire within the case.
func (c *concOrder) short() bool { return c.hold && c.ttl < longTTL }

type concCall int

const (
	callPlace concCall = iota // Take, Hold or Restock
	callConfirm
	callReturn
)

type concStep struct {
	call  concCall
	order *concOrder
}

// concPlan draws a team's steps: new takes, holds (half of them short) and
// restocks, and confirms and returns of the team's earlier orders.
func (o *orders) concPlan(team int, skus []string) []concStep {
	rng := rand.New(rand.NewPCG(uint64(team), 0x0de5))
	var steps []concStep
	var placed []*concOrder
	for n := 0; len(steps) < concSteps; n++ {
		id := o.subj.ID(fmt.Sprintf("conc-%d-%d", team, n))
		switch p := rng.IntN(20); {
		case p < 13:
			c := &concOrder{id: id, hold: p >= 7, ttl: longTTL}
			if c.hold && rng.IntN(2) == 0 {
				hold := o.suite.HoldTTL
				c.ttl = hold/2 + time.Duration(rng.Int64N(int64(hold)))
			}
			for _, i := range rng.Perm(concSKUs)[:1+rng.IntN(concMaxLines)] {
				c.lines = append(c.lines, line(skus[i], 1+rng.Int64N(concMaxQty)))
			}
			placed = append(placed, c)
			steps = append(steps, concStep{callPlace, c})
		case p < 15:
			c := &concOrder{id: id, restock: true, lines: []stockguard.Line{line(skus[rng.IntN(concSKUs)], 1+rng.Int64N(5))}}
			steps = append(steps, concStep{callPlace, c})
		case p < 17:
			open := slices.DeleteFunc(slices.Clone(placed), func(c *concOrder) bool { return !c.hold || c.confirm || c.ret })
			if len(open) > 0 {
				c := open[rng.IntN(len(open))]
				c.confirm = true
				steps = append(steps, concStep{callConfirm, c})
			}
		default:
			open := slices.DeleteFunc(slices.Clone(placed), func(c *concOrder) bool { return c.ret })
			if len(open) > 0 {
				c := open[rng.IntN(len(open))]
				c.ret = true
				steps = append(steps, concStep{callReturn, c})
			}
		}
	}
	return steps
}

// concRun is the shared state of the concurrency case's goroutines.
type concRun struct {
	o      *orders
	mu     sync.Mutex
	strays int
}

func (cr *concRun) stray(format string, args ...any) {
	cr.mu.Lock()
	defer cr.mu.Unlock()
	cr.strays++
	if cr.strays <= concMaxStrays {
		cr.o.r.add(format, args...)
	}
}

// do makes a step's call, repeating it with the same arguments while the
// outcome is unknown or the store is busy: an exactly-once store ends in
// the state one successful call would have left.
func (cr *concRun) do(inst stockguard.Orders, st concStep) (string, error) {
	c := st.order
	var op string
	var call func(context.Context) error
	switch {
	case st.call == callConfirm:
		op, call = fmt.Sprintf("Confirm(%q)", c.id), func(ctx context.Context) error { return inst.Confirm(ctx, c.id) }
	case st.call == callReturn:
		op, call = fmt.Sprintf("Return(%q)", c.id), func(ctx context.Context) error { return inst.Return(ctx, c.id) }
	case c.restock:
		l := c.lines[0]
		op, call = fmt.Sprintf("Restock(%q, %q, %d)", c.id, l.SKU, l.Qty), func(ctx context.Context) error { return inst.Restock(ctx, c.id, l.SKU, l.Qty) }
	case c.hold:
		op, call = fmt.Sprintf("Hold(%q, %v, %v)", c.id, c.ttl, c.lines), func(ctx context.Context) error { return inst.Hold(ctx, c.id, c.ttl, c.lines...) }
	default:
		op, call = fmt.Sprintf("Take(%q, %v)", c.id, c.lines), func(ctx context.Context) error { return inst.Take(ctx, c.id, c.lines...) }
	}
	ctx := cr.o.ctx
	for {
		err := call(ctx)
		if !errors.Is(err, stockguard.ErrOutcomeUnknown) && !errors.Is(err, stockguard.ErrContention) {
			return op, err
		}
		if ctx.Err() != nil {
			return op, err
		}
		time.Sleep(time.Millisecond)
	}
}

// member makes a team's steps in order through inst and checks each reply
// against what the team's plan allows.
func (cr *concRun) member(inst stockguard.Orders, steps []concStep) {
	mine := map[*concOrder]bool{} // orders this goroutine's own Take or Hold placed
	for _, st := range steps {
		if cr.o.ctx.Err() != nil {
			return
		}
		op, err := cr.do(inst, st)
		if err != nil && cr.o.ctx.Err() != nil {
			return // the case's timeout, reported once by ordersCase
		}
		c := st.order
		c.mu.Lock()
		ok := true
		switch {
		case err == nil:
			switch st.call {
			case callPlace:
				c.placed, mine[c] = true, true
				if c.hold {
					c.expires = time.Now().Add(c.ttl)
				}
			case callConfirm:
				c.confirmed = true
			case callReturn:
				c.returned = true
			}
		case st.call == callPlace && !c.restock && errors.Is(err, stockguard.ErrOrderClosed):
			// Closed by a teammate's Return or by its deadline. Either way
			// it was applied, perhaps by this goroutine's own call whose
			// outcome was unknown.
			c.placed = true
			ok = c.ret || c.short()
		case st.call == callPlace && !c.restock:
			ok = errors.Is(err, stockguard.ErrInsufficientStock)
		case st.call == callConfirm:
			ok = errors.Is(err, stockguard.ErrOrderClosed) && (c.ret || c.short()) ||
				errors.Is(err, stockguard.ErrUnknownOrder) && !mine[c]
		case st.call == callReturn:
			ok = errors.Is(err, stockguard.ErrUnknownOrder) && !mine[c]
		default:
			ok = false
		}
		c.mu.Unlock()
		if !ok {
			cr.stray("%s, the same call as its teammates', returned %v", op, err)
		}
	}
}

// finalStates returns the states the plan and the replies allow an applied
// take or hold to be in once every call returned and every short hold's
// deadline passed.
func (c *concOrder) finalStates() []stockguard.OrderState {
	switch {
	case !c.hold && c.ret:
		return []stockguard.OrderState{stockguard.OrderReturned}
	case !c.hold:
		return []stockguard.OrderState{stockguard.OrderTaken}
	case c.ret && c.short():
		return []stockguard.OrderState{stockguard.OrderReturned, stockguard.OrderExpired}
	case c.ret:
		return []stockguard.OrderState{stockguard.OrderReturned}
	case c.confirmed:
		return []stockguard.OrderState{stockguard.OrderTaken}
	case c.short():
		return []stockguard.OrderState{stockguard.OrderExpired}
	}
	return []stockguard.OrderState{stockguard.OrderHeld}
}

// checkConcurrentOrders checks the guarantees under concurrency: teams of
// goroutines over two instances place multi-line takes and holds, confirm,
// return and restock, each team member making the same calls with the same
// IDs, repeating any call whose outcome is unknown. Once every call has
// returned and every short hold has expired, it checks that every order
// acknowledged is in a state the calls allow, and conservation per SKU:
// initial + restocked == Stock + units held + units taken, which fails if a
// retry took units twice, a return gave them back twice, or a refused
// multi-line order kept some lines.
func checkConcurrentOrders(o *orders) {
	skus := make([]string, concSKUs)
	for i := range skus {
		skus[i] = o.subj.SKU(fmt.Sprintf("conc-%d", i))
		if !o.r.set(o.ctx, o.a, skus[i], concStock) {
			return
		}
	}
	goroutines := o.suite.Goroutines
	team := min(concTeam, goroutines)
	teams := (goroutines + team - 1) / team
	plans := make([][]concStep, teams)
	for i := range plans {
		plans[i] = o.concPlan(i, skus)
	}
	cr := &concRun{o: o}
	instances := []stockguard.Orders{o.a, o.b}
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Go(func() { cr.member(instances[g%2], plans[g/team]) })
	}
	wg.Wait()
	if cr.strays > concMaxStrays {
		o.r.add("and %d more replies the plan does not allow", cr.strays-concMaxStrays)
	}
	if o.ctx.Err() != nil {
		return
	}
	var last time.Time
	for _, plan := range plans {
		for _, st := range plan {
			if st.order.expires.After(last) && st.order.short() {
				last = st.order.expires
			}
		}
	}
	o.sleepPast(last, 0)

	restocked, held, taken := map[string]int64{}, map[string]int64{}, map[string]int64{}
	seen := map[*concOrder]bool{}
	complete := true
	for _, plan := range plans {
		for _, st := range plan {
			c := st.order
			if seen[c] {
				continue
			}
			seen[c] = true
			if c.restock {
				if c.placed {
					restocked[c.lines[0].SKU] += c.lines[0].Qty
				}
				continue
			}
			info, err := o.b.Order(o.ctx, c.id)
			switch {
			case errors.Is(err, stockguard.ErrUnknownOrder):
				if c.placed || c.confirmed || c.returned {
					o.r.add("Order(%q) = %v, but a call on it returned nil", c.id, err)
				}
				continue
			case !o.r.expect(fmt.Sprintf("Order(%q) after the run", c.id), err, nil):
				complete = false
				continue
			case !c.placed:
				o.r.add("Order(%q) reports %v, but every Take or Hold of it was refused", c.id, info.State)
			}
			if want := strategy.SortedLines(c.lines); !slices.Equal(info.Lines, want) {
				o.r.add("Order(%q): lines %v, want %v", c.id, info.Lines, want)
			}
			if allowed := c.finalStates(); !slices.Contains(allowed, info.State) {
				o.r.add("Order(%q) (hold %v, ttl %v, confirm %v/acknowledged %v, return %v): state %v, want one of %v",
					c.id, c.hold, c.ttl, c.confirm, c.confirmed, c.ret, info.State, allowed)
			}
			switch info.State {
			case stockguard.OrderHeld:
				addLines(held, info.Lines)
			case stockguard.OrderTaken:
				addLines(taken, info.Lines)
			}
		}
	}
	if !complete {
		return
	}
	for _, sku := range skus {
		level, err := o.b.Stock(o.ctx, sku)
		if !o.r.expect(fmt.Sprintf("Stock(%q) after the run", sku), err, nil) {
			continue
		}
		want := concStock + restocked[sku]
		got := level + held[sku] + taken[sku]
		switch {
		case level < 0:
			o.r.add("%q went below zero: %d", sku, level)
		case got < want:
			o.r.add("%q: %d units vanished (taken twice, or taken for an order that was refused): stock %d + held %d + taken %d < initial %d + restocked %d",
				sku, want-got, level, held[sku], taken[sku], concStock, restocked[sku])
		case got > want:
			o.r.add("%q: %d units appeared (given back twice, or recorded without being taken): stock %d + held %d + taken %d > initial %d + restocked %d",
				sku, got-want, level, held[sku], taken[sku], concStock, restocked[sku])
		}
	}
}

func addLines(sum map[string]int64, lines []stockguard.Line) {
	for _, l := range lines {
		sum[l.SKU] += l.Qty
	}
}
