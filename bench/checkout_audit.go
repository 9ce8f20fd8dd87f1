package bench

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/stockguard/stockguard"
)

// deadlineMargin is how long the audit waits past the last hold's deadline
// (by the client's clock) before it expects every hold to be over: room
// for the backend's clock and for the request that carried the hold.
const deadlineMargin = 100 * time.Millisecond

// finding is what Order reported of one placed order.
type finding struct {
	state stockguard.OrderState // stateNone: no order under the ID
	lines []stockguard.Line
}

// auditOrders audits a Checkout. Once every hold's deadline has passed it
// settles what the workers left open — repeats every restock whose outcome
// they did not learn until it answers, makes the late calls of holds left
// to expire and repeats a share of the acknowledged orders under their IDs
// — then reads the stock, asks ord for every order a worker placed
// (refused ones included), reads the stock again, checks each order
// against the results its calls got, and checks per SKU, on each of the
// four readings (through ord and through raw, before and after the
// orders), that initial + restocked == stock + held + taken. Reading the
// stock before any Order call keeps a store that settles an order only
// when asked from looking right.
func (r *run) auditOrders(ctx context.Context, ord stockguard.Orders, raw func(context.Context, string) (int64, error)) Audit {
	a := Audit{Raw: raw != nil}
	type ref struct {
		worker int
		p      *placed
	}
	var refs []ref
	var last time.Duration
	for wi, wk := range r.workers {
		ow := wk.ow
		last = max(last, ow.deadline)
		a.Unknown += ow.unknown
		a.Reconciled += ow.reconciled
		for j := range ow.placed {
			refs = append(refs, ref{wi, &ow.placed[j]})
		}
	}
	if wait := last + deadlineMargin - time.Since(r.base); last > 0 && wait > 0 {
		t := time.NewTimer(wait)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			a.fail(ctx.Err())
			return a
		}
	}
	r.settleRestocks(ctx, ord, &a)
	var mu sync.Mutex // guards a while the calls run in parallel
	bad := func(format string, args ...any) {
		mu.Lock()
		defer mu.Unlock()
		a.BadOrders++
		a.problem(format, args...)
	}
	parallel(len(refs), func(i int) error {
		id := r.co.orderID(refs[i].worker, refs[i].p.seq)
		r.lateCalls(ctx, ord, id, refs[i].p, bad)
		return nil
	})

	before := r.readStock(ctx, ord, raw)
	found := make([]finding, len(refs))
	failed := make([]error, len(refs))
	parallel(len(refs), func(i int) error {
		id := r.co.orderID(refs[i].worker, refs[i].p.seq)
		info, err := ord.Order(ctx, id)
		switch {
		case errors.Is(err, stockguard.ErrUnknownOrder):
			found[i] = finding{state: stateNone}
		case err != nil:
			failed[i] = fmt.Errorf("Order(%q): %w", id, err)
		default:
			found[i] = finding{state: info.State, lines: info.Lines}
		}
		return nil
	})
	after := r.readStock(ctx, ord, raw)

	index := make(map[string]int, len(r.skus))
	for i, sku := range r.skus {
		index[sku] = i
	}
	held := make([]int64, len(r.skus))
	taken := make([]int64, len(r.skus))
	for i, ref := range refs {
		p, f := ref.p, found[i]
		if failed[i] != nil {
			a.fail(failed[i])
			continue
		}
		id := r.co.orderID(ref.worker, p.seq)
		units := int64(0)
		for _, l := range p.lines {
			units += l.Qty
		}
		a.Orders++
		a.Reconciled += int64(p.unresolved) // Order tells what became of them
		switch {
		case p.placedUnknown:
			a.UnknownUnits += units
		case p.acked:
			a.Acked += units
		}
		if !p.want.has(f.state) {
			a.BadOrders++
			wantOpen := p.want&states(stockguard.OrderHeld, stockguard.OrderTaken) != 0
			wantClosed := p.want&states(stateNone, stockguard.OrderReturned, stockguard.OrderExpired) != 0
			switch {
			case wantOpen && !wantClosed && !f.state.Open():
				a.Oversold += units // a buyer holds units that went back to the stock
			case !wantOpen && f.state.Open():
				a.Lost += units // units nobody holds never came back
			}
			a.problem("order %s: expected %s, found %s", id, p.want, stateName(f.state))
		}
		if f.state == stateNone {
			continue
		}
		dup, other := compareLines(p.lines, f.lines)
		a.Duplicated += dup
		if dup > 0 {
			a.problem("order %s: %d units taken beyond its lines (%v recorded for %v)", id, dup, f.lines, p.lines)
		}
		if other {
			a.BadOrders++
			a.problem("order %s: recorded with lines %v, placed with %v", id, f.lines, p.lines)
		}
		if !f.state.Open() {
			continue
		}
		for _, l := range f.lines {
			j, ok := index[l.SKU]
			if !ok {
				continue // counted as other lines above
			}
			if f.state == stockguard.OrderHeld {
				held[j] += l.Qty
			} else {
				taken[j] += l.Qty
			}
		}
	}

	for i, sku := range r.skus {
		if okBefore, okAfter := before.check(&a, i, sku), after.check(&a, i, sku); !okBefore && !okAfter {
			continue
		}
		restocked := r.co.restocked[i].Load()
		var vals []int64
		for _, rd := range []readings{before, after} {
			if rd.finalErr[i] == nil {
				vals = append(vals, rd.final[i])
			}
			if raw != nil && rd.rawErr[i] == nil {
				vals = append(vals, rd.raw[i])
			}
		}
		mismatch := raw != nil && after.finalErr[i] == nil && after.rawErr[i] == nil && after.final[i] != after.raw[i]
		if mismatch {
			a.Mismatches++
		}
		var over, lost int64
		for _, f := range vals {
			d := r.initial[i] + restocked - f - held[i] - taken[i]
			lost = max(lost, d)
			over = max(over, -d)
		}
		truth := vals[len(vals)-1] // the backend's last reading, when there is one
		a.Initial += r.initial[i]
		a.Restocked += restocked
		a.Held += held[i]
		a.Taken += taken[i]
		a.Final += after.final[i]
		a.RawFinal += after.raw[i]
		a.Gone += r.initial[i] + restocked - truth
		a.Oversold += over
		a.Lost += lost
		if over > 0 || lost > 0 || mismatch || slices.Min(vals) != slices.Max(vals) {
			msg := fmt.Sprintf("%s: stocked %d, restocked %d, held %d, taken %d, stock read %v (via Stock, from the backend; before and after the orders)",
				sku, r.initial[i], restocked, held[i], taken[i], vals)
			if over > 0 {
				msg += fmt.Sprintf(": OVERSOLD %d", over)
			}
			if lost > 0 {
				msg += fmt.Sprintf(": LOST %d", lost)
			}
			a.problem("%s", msg)
		}
	}
	return a
}

// settleRestocks repeats, under its ID, every restock whose outcome the
// workers did not learn, until it answers: restocks are exactly-once per
// ID, so afterwards each has been applied once (nil) or never (a refusal),
// and the audit counts restocked units exactly. One that never answers
// fails the audit.
func (r *run) settleRestocks(ctx context.Context, ord stockguard.Orders, a *Audit) {
	for wi, wk := range r.workers {
		for _, rc := range wk.ow.unsettled {
			id := r.co.orderID(wi, rc.seq)
			err := untilAnswered(ctx, func(ctx context.Context) error { return ord.Restock(ctx, id, r.skus[rc.sku], rc.qty) })
			switch Classify(err) {
			case KindOK:
				r.co.restocked[rc.sku].Add(rc.qty)
				a.Reconciled++
			case KindOutcomeUnknown, KindOther, KindCanceled, KindContention, KindUnavailable:
				a.fail(fmt.Errorf("restock %s never answered: %w", id, err))
			default:
				a.Reconciled++ // refused: never applied
			}
		}
	}
}

// lateCalls makes the audit's calls on one order once every deadline has
// passed: the late Return or Confirm of a hold left to expire, and, for one
// acknowledged order in four, its Take or Hold again under its ID, which
// must change nothing. bad records a result the contract does not allow.
func (r *run) lateCalls(ctx context.Context, ord stockguard.Orders, id string, p *placed, bad func(string, ...any)) {
	if !p.acked {
		return
	}
	switch p.late {
	case lateReturn:
		if err := untilAnswered(ctx, func(ctx context.Context) error { return ord.Return(ctx, id) }); err != nil {
			bad("order %s: Return after its hold's deadline: %v, want nil", id, err)
		}
	case lateConfirm:
		err := untilAnswered(ctx, func(ctx context.Context) error { return ord.Confirm(ctx, id) })
		switch {
		case err == nil:
			p.want = states(stockguard.OrderTaken) // taken now, wrongly
			bad("order %s: Confirm after its hold's deadline answered nil, want ErrOrderClosed", id)
		case !errors.Is(err, stockguard.ErrOrderClosed):
			bad("order %s: Confirm after its hold's deadline: %v, want ErrOrderClosed", id, err)
		}
	}
	if p.seq%4 != 0 {
		return
	}
	err := untilAnswered(ctx, func(ctx context.Context) error {
		if p.hold {
			return ord.Hold(ctx, id, r.w.Orders.HoldTTL, p.lines...)
		}
		return ord.Take(ctx, id, p.lines...)
	})
	open := states(stockguard.OrderHeld, stockguard.OrderTaken)
	closed := states(stockguard.OrderReturned, stockguard.OrderExpired)
	switch {
	case err == nil && p.want&open != 0, errors.Is(err, stockguard.ErrOrderClosed) && p.want&closed != 0:
	default:
		bad("order %s: placed again under its ID once %s: %v", id, p.want, err)
	}
}

// untilAnswered makes call and repeats it, the same ID and arguments, while
// its outcome is unknown or the store cannot answer, until ctx ends.
func untilAnswered(ctx context.Context, call func(context.Context) error) error {
	for i := 0; ; i++ {
		err := call(ctx)
		switch Classify(err) {
		case KindOutcomeUnknown, KindOther, KindContention, KindUnavailable, KindCanceled:
		default:
			return err
		}
		t := time.NewTimer(min(time.Millisecond<<min(i, 10), 100*time.Millisecond))
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return errors.Join(err, ctx.Err())
		}
	}
}

// compareLines compares an order's recorded lines with those it was placed
// with: dup is the units recorded beyond the placed quantity of a SKU (a
// retry applied twice), other whether any SKU is missing, short or foreign.
func compareLines(placed, recorded []stockguard.Line) (dup int64, other bool) {
	want := make(map[string]int64, len(placed))
	for _, l := range placed {
		want[l.SKU] = l.Qty
	}
	seen := 0
	for _, l := range recorded {
		q, ok := want[l.SKU]
		switch {
		case !ok:
			other = true
			continue
		case l.Qty > q:
			dup += l.Qty - q
		case l.Qty < q:
			other = true
		}
		seen++
	}
	return dup, other || seen != len(placed)
}

func stateName(s stockguard.OrderState) string {
	if s == stateNone {
		return "no order"
	}
	return s.String()
}

// String lists the states of s, "taken or returned".
func (s stateSet) String() string {
	var names []string
	for _, st := range []stockguard.OrderState{stateNone, stockguard.OrderHeld, stockguard.OrderTaken, stockguard.OrderReturned, stockguard.OrderExpired} {
		if s.has(st) {
			names = append(names, stateName(st))
		}
	}
	return strings.Join(names, " or ")
}
