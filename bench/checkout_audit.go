package bench

import (
	"context"
	"errors"
	"fmt"
	"strings"
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

// auditOrders audits a Checkout: once every hold's deadline has passed it
// asks ord for every order a worker may have applied, checks each against
// the results its calls got, and checks per SKU that initial + restocked ==
// stock + held + taken, the stock read through ord and through raw.
func (r *run) auditOrders(ctx context.Context, ord stockguard.Orders, raw func(context.Context, string) (int64, error)) (Audit, error) {
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
			return a, ctx.Err()
		}
	}

	found := make([]finding, len(refs))
	err := parallel(len(refs), func(i int) error {
		id := r.co.orderID(refs[i].worker, refs[i].p.seq)
		info, err := ord.Order(ctx, id)
		switch {
		case errors.Is(err, stockguard.ErrUnknownOrder):
			found[i] = finding{state: stateNone}
		case err != nil:
			return fmt.Errorf("Order(%q): %w", id, err)
		default:
			found[i] = finding{state: info.State, lines: info.Lines}
		}
		return nil
	})
	if err != nil {
		return a, err
	}

	index := make(map[string]int, len(r.skus))
	for i, sku := range r.skus {
		index[sku] = i
	}
	held := make([]int64, len(r.skus))
	taken := make([]int64, len(r.skus))
	problem := func(format string, args ...any) {
		if len(a.Problems) < maxSamples {
			a.Problems = append(a.Problems, fmt.Sprintf(format, args...))
		}
	}
	for i, ref := range refs {
		p, f := ref.p, found[i]
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
		case p.want != anyClosed:
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
			problem("order %s: expected %s, found %s", id, p.want, stateName(f.state))
		}
		if f.state == stateNone {
			continue
		}
		dup, other := compareLines(p.lines, f.lines)
		a.Duplicated += dup
		if dup > 0 {
			problem("order %s: %d units taken beyond its lines (%v recorded for %v)", id, dup, f.lines, p.lines)
		}
		if other {
			a.BadOrders++
			problem("order %s: recorded with lines %v, placed with %v", id, f.lines, p.lines)
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

	final, rawFinal, err := r.readFinal(ctx, ord, raw)
	if err != nil {
		return a, err
	}
	for i, sku := range r.skus {
		restocked := r.co.restocked[i].Load()
		maybe := r.co.restockUnknown[i].Load()
		readings := []int64{final[i]}
		truth := final[i]
		if raw != nil {
			readings = append(readings, rawFinal[i])
			truth = rawFinal[i]
			if rawFinal[i] != final[i] {
				a.Mismatches++
			}
		}
		var over, lost int64
		for _, f := range readings {
			// Restocks of unknown outcome may have added up to maybe units.
			d := r.initial[i] + restocked - f - held[i] - taken[i]
			lost = max(lost, d)
			over = max(over, -(d + maybe))
		}
		a.Initial += r.initial[i]
		a.Restocked += restocked
		a.Held += held[i]
		a.Taken += taken[i]
		a.Final += final[i]
		if raw != nil {
			a.RawFinal += rawFinal[i]
		}
		a.Gone += r.initial[i] + restocked - truth
		a.Oversold += over
		a.Lost += lost
		if over > 0 || lost > 0 || (raw != nil && rawFinal[i] != final[i]) {
			msg := fmt.Sprintf("%s: stocked %d, restocked %d, held %d, taken %d, final %d via Stock", sku, r.initial[i], restocked, held[i], taken[i], final[i])
			if raw != nil {
				msg += fmt.Sprintf(", %d in the backend", rawFinal[i])
			}
			if over > 0 {
				msg += fmt.Sprintf(": OVERSOLD %d", over)
			}
			if lost > 0 {
				msg += fmt.Sprintf(": LOST %d", lost)
			}
			problem("%s", msg)
		}
	}
	return a, nil
}

// readFinal reads every SKU's stock through inv and, when raw is set,
// straight from the backend.
func (r *run) readFinal(ctx context.Context, inv stockguard.Inventory, raw func(context.Context, string) (int64, error)) (final, rawFinal []int64, err error) {
	n := len(r.skus)
	final = make([]int64, n)
	if raw != nil {
		rawFinal = make([]int64, n)
	}
	err = parallel(n, func(i int) error {
		v, err := inv.Stock(ctx, r.skus[i])
		if err != nil {
			return fmt.Errorf("Stock(%q): %w", r.skus[i], err)
		}
		final[i] = v
		if raw != nil {
			if rawFinal[i], err = raw(ctx, r.skus[i]); err != nil {
				return fmt.Errorf("reading %q from the backend: %w", r.skus[i], err)
			}
		}
		return nil
	})
	return final, rawFinal, err
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
