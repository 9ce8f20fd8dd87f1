package stocktest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/stockguard/stockguard"
	"github.com/stockguard/stockguard/strategy"
)

// The store an Orders run works on: few SKUs with little stock, so that
// they sell out and refusals are common, and holds whose TTLs end during
// the run.
const (
	advOrderSKUs = 6
	advInitial   = 20
)

var advTTLs = []time.Duration{2 * time.Millisecond, 40 * time.Millisecond, 300 * time.Millisecond, 600 * time.Millisecond}

// stateSet is the set of states an order may be in, as far as its
// history tells.
type stateSet uint8

func setOf(states ...stockguard.OrderState) stateSet {
	var s stateSet
	for _, st := range states {
		s |= 1 << st
	}
	return s
}

var (
	setOpen   = setOf(stockguard.OrderHeld, stockguard.OrderTaken)
	setClosed = setOf(stockguard.OrderReturned, stockguard.OrderExpired)
)

func (s stateSet) has(st stockguard.OrderState) bool { return st > 0 && st < 8 && s&(1<<st) != 0 }

// expiring adds Expired to a set that holds Held: a hold may expire at
// any moment.
func (s stateSet) expiring() stateSet {
	if s.has(stockguard.OrderHeld) {
		s |= setOf(stockguard.OrderExpired)
	}
	return s
}

func (s stateSet) String() string {
	var names []string
	for st := stockguard.OrderHeld; st <= stockguard.OrderExpired; st++ {
		if s.has(st) {
			names = append(names, st.String())
		}
	}
	return "{" + strings.Join(names, ",") + "}"
}

// advOrder is what one ID's definite answers say about it.
type advOrder struct {
	id       string
	hold     bool              // placed by Hold (when recorded)
	lines    []stockguard.Line // in SKU order (when recorded)
	recorded bool
	states   stateSet // when recorded
	refused  bool     // the last placement was refused: nothing may be recorded
	unsure   bool     // the last call had attempts without a definite answer
	hist     []string
}

func (o *advOrder) note(format string, args ...any) {
	o.hist = append(o.hist, fmt.Sprintf(format, args...))
}

func (o *advOrder) history() string {
	h := o.hist
	if len(h) > 12 {
		h = append([]string{fmt.Sprintf("(%d earlier calls)", len(h)-12)}, h[len(h)-12:]...)
	}
	return "\n\t\t" + strings.Join(h, "\n\t\t")
}

func (o *advOrder) String() string {
	if !o.recorded {
		return "not recorded"
	}
	kind := "take"
	if o.hold {
		kind = "hold"
	}
	return fmt.Sprintf("%s %v in %v", kind, o.lines, o.states)
}

// advRestock is one restock ID.
type advRestock struct {
	id       string
	sku      string
	qty      int64
	recorded bool
	hist     []string
}

// ordersRun is one Orders run of an adversary.
type ordersRun struct {
	cfg     adversary
	insts   []stockguard.Orders
	skus    []string // the SKUs orders take
	started []atomic.Int64
	vs      violations
	workers []*ordersWorker
	stats   struct{ calls, tries, levels, refused, held, taken atomic.Int64 }
}

// ordersWorker is one goroutine of an Orders run; it alone uses its IDs
// and its SKU for SetStock, so its model of them needs no lock.
type ordersWorker struct {
	caller
	run      *ordersRun
	tag      string
	orders   []*advOrder
	restocks []*advRestock
	setSKU   string
	level    int64
	next     int
}

func (a adversary) checkOrders(ctx context.Context, insts []stockguard.Orders) ([]Violation, string) {
	if len(insts) == 0 {
		return []Violation{{Case: "Adversary", Detail: "no instances"}}, ""
	}
	tag := runTag()
	r := &ordersRun{cfg: a, insts: insts, started: make([]atomic.Int64, advOrderSKUs)}
	for i := range advOrderSKUs {
		r.skus = append(r.skus, fmt.Sprintf("adv-%d~%s", i, tag))
	}
	for _, sku := range r.skus {
		if err := insts[0].SetStock(ctx, sku, advInitial); err != nil {
			return []Violation{{Case: "Adversary", Detail: fmt.Sprintf("SetStock(%q): %v", sku, err)}}, ""
		}
	}
	for w := range a.Workers {
		wk := &ordersWorker{caller: newCaller(ctx, a.Seed, w, len(insts)), run: r, tag: tag}
		wk.setSKU = fmt.Sprintf("adv-set-%d~%s", w, tag)
		wk.level = int64(wk.rng.IntN(100))
		if err := insts[0].SetStock(ctx, wk.setSKU, wk.level); err != nil {
			return []Violation{{Case: "Adversary", Detail: fmt.Sprintf("SetStock(%q): %v", wk.setSKU, err)}}, ""
		}
		r.workers = append(r.workers, wk)
	}
	for round := range a.Rounds {
		end := time.Now().Add(a.Duration / time.Duration(a.Rounds))
		var wg sync.WaitGroup
		for _, wk := range r.workers {
			wg.Go(func() {
				for time.Now().Before(end) && ctx.Err() == nil {
					wk.step()
				}
			})
		}
		wg.Wait()
		if ctx.Err() != nil {
			r.vs.add("the test ended before the run did: %v", ctx.Err())
			break
		}
		r.quietCheck(ctx, round)
		if len(r.vs.list()) > 0 {
			break
		}
	}
	st := &r.stats
	return r.vs.list(), fmt.Sprintf("%d order calls in %d attempts, %d SetStock and Stock calls; %d takes and %d holds acknowledged, %d refused",
		st.calls.Load(), st.tries.Load(), st.levels.Load(), st.taken.Load(), st.held.Load(), st.refused.Load())
}

// step makes one call of a random kind.
func (w *ordersWorker) step() {
	p := w.rng.IntN(100)
	var o *advOrder
	if len(w.orders) > 0 {
		o = w.orders[w.rng.IntN(len(w.orders))]
	}
	switch {
	case p < 28 || o == nil:
		w.next++
		o = &advOrder{id: fmt.Sprintf("adv-%d-%d~%s", w.w, w.next, w.tag)}
		w.orders = append(w.orders, o)
		w.place(o, w.rng.IntN(2) == 0, w.cart())
	case p < 38:
		w.confirm(o)
	case p < 48:
		w.ret(o)
	case p < 56:
		if o.recorded {
			w.place(o, o.hold, o.lines)
		} else {
			w.place(o, w.rng.IntN(2) == 0, w.cart())
		}
	case p < 64:
		w.otherCart(o)
	case p < 70:
		w.order(o, "")
	case p < 78:
		w.restock()
	case p < 82:
		w.kindProbe(o)
	case p < 90:
		w.setStock()
	default:
		w.stock()
	}
}

// cart returns 1–3 lines over distinct SKUs of 1–3 units each.
func (w *ordersWorker) cart() []stockguard.Line {
	n := 1 + w.rng.IntN(3)
	var lines []stockguard.Line
	for _, i := range w.rng.Perm(len(w.run.skus))[:n] {
		lines = append(lines, stockguard.Line{SKU: w.run.skus[i], Qty: 1 + int64(w.rng.IntN(3))})
	}
	return lines
}

func (w *ordersWorker) fail(o *advOrder, format string, args ...any) {
	w.run.vs.add("order %q: %s; its calls (worker %d):%s", o.id, fmt.Sprintf(format, args...), w.w, o.history())
}

func tries(ts []attempt) string {
	parts := make([]string, len(ts))
	for i, t := range ts {
		parts[i] = t.String()
	}
	return strings.Join(parts, "; ")
}

// call repeats f until a definite answer and notes it on o. ok is false
// when there was none (noted as a violation unless the test ended).
func (w *ordersWorker) call(o *advOrder, what string, f func(ctx context.Context, inst stockguard.Orders) error) (error, bool) {
	w.run.stats.calls.Add(1)
	ts, ok, err := w.repeat(func(ctx context.Context, i int) error { return f(ctx, w.run.insts[i]) })
	w.run.stats.tries.Add(int64(len(ts)))
	o.note("%s → %s", what, tries(ts))
	o.unsure = len(ts) > 1
	if !ok && w.ctx.Err() == nil {
		w.fail(o, "%s: no definite answer in %d attempts", what, maxAttempts)
	}
	return err, ok
}

func isRefusal(err error) bool {
	return errors.Is(err, stockguard.ErrInsufficientStock) || errors.Is(err, stockguard.ErrUnknownSKU)
}

// place takes or holds lines under o's ID and checks the answer against
// what o's history allows.
func (w *ordersWorker) place(o *advOrder, hold bool, lines []stockguard.Line) {
	lines = strategy.SortedLines(lines)
	ttl := advTTLs[w.rng.IntN(len(advTTLs))]
	what := fmt.Sprintf("Take(%v)", lines)
	if hold {
		what = fmt.Sprintf("Hold(%v, %v)", ttl, lines)
	}
	err, ok := w.call(o, what, func(ctx context.Context, inst stockguard.Orders) error {
		if hold {
			return inst.Hold(ctx, o.id, ttl, lines...)
		}
		return inst.Take(ctx, o.id, lines...)
	})
	if !ok {
		return
	}
	same := o.recorded && o.hold == hold && slices.Equal(o.lines, lines)
	switch {
	case !o.recorded:
		switch {
		case err == nil:
			o.recorded, o.refused, o.hold, o.lines = true, false, hold, lines
			o.states = setOf(stockguard.OrderTaken)
			if hold {
				o.states = setOf(stockguard.OrderHeld).expiring()
				w.run.stats.held.Add(1)
			} else {
				w.run.stats.taken.Add(1)
			}
		case errors.Is(err, stockguard.ErrOrderClosed) && o.unsure:
			// An abandoned attempt applied it, and it closed since: a hold
			// expired (nothing returns an order the model does not know).
			o.recorded, o.refused, o.hold, o.lines = true, false, hold, lines
			o.states = setOf(stockguard.OrderExpired)
			if !hold {
				w.fail(o, "a take answered %s: nothing returned it", answer(err))
			}
		case isRefusal(err):
			w.run.stats.refused.Add(1)
			o.refused = true
			w.order(o, "right after its refusal")
		default:
			w.fail(o, "a placement under an ID never recorded answered %s", answer(err))
		}
	case same:
		switch {
		case err == nil:
			if o.states&setOpen == 0 {
				w.fail(o, "a repeat answered nil, but the order is %v", o.states)
			}
			o.states = (o.states & setOpen).expiring()
		case errors.Is(err, stockguard.ErrOrderClosed):
			if o.states&setClosed == 0 {
				w.fail(o, "a repeat answered %s, but the order is %v", answer(err), o.states)
			}
			o.states &= setClosed
		case isRefusal(err):
			w.fail(o, "a repeat of a recorded order was refused (%s): it was applied and the buyer is told no", answer(err))
		default:
			w.fail(o, "a repeat with the same cart answered %s", answer(err))
		}
	default: // another cart or kind under a recorded ID
		if !errors.Is(err, stockguard.ErrOrderMismatch) {
			w.fail(o, "another cart under a recorded ID answered %s, want %s", answer(err), stockguard.ErrOrderMismatch)
		}
	}
}

// otherCart repeats o's ID with another cart: for a recorded order a
// mismatch, for a refused one a fresh placement.
func (w *ordersWorker) otherCart(o *advOrder) {
	if !o.recorded {
		w.place(o, w.rng.IntN(2) == 0, w.cart())
		return
	}
	lines := slices.Clone(o.lines)
	hold := o.hold
	if w.rng.IntN(2) == 0 {
		hold = !hold
	} else {
		i := w.rng.IntN(len(lines))
		lines[i].Qty++
	}
	w.place(o, hold, lines)
}

func (w *ordersWorker) confirm(o *advOrder) {
	err, ok := w.call(o, "Confirm", func(ctx context.Context, inst stockguard.Orders) error { return inst.Confirm(ctx, o.id) })
	if !ok {
		return
	}
	switch {
	case err == nil:
		if !o.recorded || o.states&setOpen == 0 {
			w.fail(o, "Confirm answered nil, but the order is %v", o)
		}
		o.states = setOf(stockguard.OrderTaken)
	case errors.Is(err, stockguard.ErrOrderClosed):
		if !o.recorded || o.states&setClosed == 0 {
			w.fail(o, "Confirm answered %s, but the order is %v", answer(err), o)
		}
		o.states &= setClosed
	case errors.Is(err, stockguard.ErrUnknownOrder):
		if o.recorded {
			w.fail(o, "Confirm answered %s, but the order is %v", answer(err), o)
		}
	default:
		w.fail(o, "Confirm answered %s", answer(err))
	}
}

func (w *ordersWorker) ret(o *advOrder) {
	err, ok := w.call(o, "Return", func(ctx context.Context, inst stockguard.Orders) error { return inst.Return(ctx, o.id) })
	if !ok {
		return
	}
	switch {
	case err == nil:
		if !o.recorded {
			w.fail(o, "Return answered nil, but the order is %v", o)
		}
		next := o.states & setClosed
		if o.states&setOpen != 0 {
			next |= setOf(stockguard.OrderReturned)
		}
		o.states = next
	case errors.Is(err, stockguard.ErrUnknownOrder):
		if o.recorded {
			w.fail(o, "Return answered %s, but the order is %v", answer(err), o)
		}
	default:
		w.fail(o, "Return answered %s", answer(err))
	}
}

// order reads o's record and checks it against the model; when says
// why it is read at that moment.
func (w *ordersWorker) order(o *advOrder, when string) {
	var info stockguard.OrderInfo
	err, ok := w.call(o, "Order", func(ctx context.Context, inst stockguard.Orders) error {
		var err error
		info, err = inst.Order(ctx, o.id)
		return err
	})
	if !ok {
		return
	}
	if err == nil {
		o.hist[len(o.hist)-1] += fmt.Sprintf(" (%v %v)", info.State, info.Lines)
	}
	if msg := o.observe(info, err); msg != "" {
		if when != "" {
			msg += " " + when
		}
		w.fail(o, "%s", msg)
	}
}

// observe checks one answer of Order against o, narrows o to it, and
// returns what is wrong ("" when nothing is).
func (o *advOrder) observe(info stockguard.OrderInfo, err error) string {
	switch {
	case err == nil:
		if !o.recorded {
			if o.refused {
				return fmt.Sprintf("refused, yet recorded: Order says %v %v", info.State, info.Lines)
			}
			return fmt.Sprintf("never applied, yet Order says %v %v", info.State, info.Lines)
		}
		if !slices.Equal(info.Lines, o.lines) {
			return fmt.Sprintf("recorded with lines %v, but Order says %v", o.lines, info.Lines)
		}
		if !o.states.has(info.State) {
			return fmt.Sprintf("may be %v, but Order says %v", o.states, info.State)
		}
		o.states = setOf(info.State).expiring()
	case errors.Is(err, stockguard.ErrUnknownOrder):
		if o.recorded {
			return fmt.Sprintf("acknowledged as %v, but Order says %s", o, answer(err))
		}
	default:
		return fmt.Sprintf("Order answered %s", answer(err))
	}
	return ""
}

// restock adds units under a new restock ID, or repeats an old one with
// the same or another quantity.
func (w *ordersWorker) restock() {
	p := w.rng.IntN(10)
	var r *advRestock
	switch {
	case p < 6 || len(w.restocks) == 0:
		w.next++
		r = &advRestock{id: fmt.Sprintf("adv-rs-%d-%d~%s", w.w, w.next, w.tag), sku: w.run.skus[w.rng.IntN(len(w.run.skus))], qty: 1 + int64(w.rng.IntN(5))}
		w.restocks = append(w.restocks, r)
		w.run.started[slices.Index(w.run.skus, r.sku)].Add(r.qty)
	default:
		r = w.restocks[w.rng.IntN(len(w.restocks))]
	}
	qty := r.qty
	if p == 9 && r.recorded {
		qty++
	}
	o := &advOrder{id: r.id, hist: r.hist}
	err, ok := w.call(o, fmt.Sprintf("Restock(%q, %d)", r.sku, qty), func(ctx context.Context, inst stockguard.Orders) error {
		return inst.Restock(ctx, r.id, r.sku, qty)
	})
	r.hist = o.hist
	if !ok {
		return
	}
	switch {
	case qty != r.qty:
		if !errors.Is(err, stockguard.ErrOrderMismatch) {
			w.fail(o, "a restock repeated with another quantity answered %s, want %s", answer(err), stockguard.ErrOrderMismatch)
		}
	case err == nil:
		r.recorded = true
	default:
		w.fail(o, "Restock of a stocked SKU answered %s", answer(err))
	}
}

// kindProbe calls o's ID as the other kind of call: a restock under an
// order's ID, or Confirm or Return under a restock's ID. Both are
// mismatches once the first is recorded.
func (w *ordersWorker) kindProbe(o *advOrder) {
	if w.rng.IntN(2) == 0 && o.recorded {
		l := o.lines[w.rng.IntN(len(o.lines))]
		err, ok := w.call(o, fmt.Sprintf("Restock(%q, %d) under the order's ID", l.SKU, l.Qty), func(ctx context.Context, inst stockguard.Orders) error {
			return inst.Restock(ctx, o.id, l.SKU, l.Qty)
		})
		if ok && !errors.Is(err, stockguard.ErrOrderMismatch) {
			w.fail(o, "a restock under a recorded order's ID answered %s, want %s", answer(err), stockguard.ErrOrderMismatch)
		}
		return
	}
	var r *advRestock
	for _, c := range w.restocks {
		if c.recorded {
			r = c
			break
		}
	}
	if r == nil {
		return
	}
	ro := &advOrder{id: r.id, hist: r.hist}
	err, ok := w.call(ro, "Confirm under a restock's ID", func(ctx context.Context, inst stockguard.Orders) error { return inst.Confirm(ctx, r.id) })
	r.hist = ro.hist
	if ok && !errors.Is(err, stockguard.ErrOrderMismatch) {
		w.fail(ro, "Confirm under a restock's ID answered %s, want %s", answer(err), stockguard.ErrOrderMismatch)
	}
}

// setStock overwrites the worker's own SKU and reads it back: nobody else
// writes it, so the level must be the one set.
func (w *ordersWorker) setStock() {
	level := int64(w.rng.IntN(1000))
	o := &advOrder{id: "SetStock " + w.setSKU}
	a := w.patiently(func(ctx context.Context, i int) error { return w.run.insts[i].SetStock(ctx, w.setSKU, level) })
	w.run.stats.levels.Add(1)
	if a.err != nil {
		if w.ctx.Err() == nil {
			o.note("SetStock(%d) → %v", level, a)
			w.fail(o, "SetStock answered %s", answer(a.err))
		}
		return
	}
	w.level = level
	w.readSet(o)
}

func (w *ordersWorker) readSet(o *advOrder) {
	var got int64
	a := w.patiently(func(ctx context.Context, i int) error {
		var err error
		got, err = w.run.insts[i].Stock(ctx, w.setSKU)
		return err
	})
	if w.ctx.Err() != nil {
		return
	}
	if a.err != nil || got != w.level {
		o.note("Stock → %v, %d", a, got)
		w.fail(o, "Stock = %d, %s; the only writer set %d", got, answer(a.err), w.level)
	}
}

// stock reads an order SKU's level while others take and restock it: it
// can be no more than the initial stock and every restock begun so far.
func (w *ordersWorker) stock() {
	i := w.rng.IntN(len(w.run.skus))
	var got int64
	a := w.patiently(func(ctx context.Context, inst int) error {
		var err error
		got, err = w.run.insts[inst].Stock(ctx, w.run.skus[i])
		return err
	})
	if w.ctx.Err() != nil {
		return
	}
	w.run.stats.levels.Add(1)
	ceiling := advInitial + w.run.started[i].Load()
	if a.err != nil || got < 0 || got > ceiling {
		w.run.vs.add("Stock(%q) = %d, %s; want 0…%d (initial and every restock begun)", w.run.skus[i], got, answer(a.err), ceiling)
	}
}

// quietCheck compares the store with the model while no call runs.
func (r *ordersRun) quietCheck(ctx context.Context, round int) {
	if r.cfg.Quiet != nil {
		skus := slices.Clone(r.skus)
		for _, w := range r.workers {
			skus = append(skus, w.setSKU)
		}
		if err := r.cfg.Quiet(ctx, skus); err != nil {
			r.vs.add("Quiet after round %d: %v", round, err)
			return
		}
	}
	var all []*advOrder
	var restocks []*advRestock
	for _, w := range r.workers {
		all = append(all, w.orders...)
		restocks = append(restocks, w.restocks...)
	}
	// Each quiet check reads through another instance.
	inst := r.insts[round%len(r.insts)]
	type read struct {
		info stockguard.OrderInfo
		err  error
	}
	// A hold that expires between the reads of the levels and of the
	// orders would make them disagree: read the levels before and after
	// the orders until both agree, so no hold expired in between.
	var reads []read
	var levels []int64 // nil: the levels could not be read, so conservation is not checked
	readOrders := func() {
		reads = make([]read, len(all))
		parallel(len(all), r.cfg.Workers, func(i int) {
			reads[i].info, reads[i].err = inst.Order(ctx, all[i].id)
		})
	}
	for try := 0; ; try++ {
		before, err := levelsOf(ctx, inst, r.skus)
		readOrders()
		if err != nil {
			r.vs.add("quiet check after round %d: %v", round, err)
			break
		}
		after, err := levelsOf(ctx, inst, r.skus)
		if err != nil {
			r.vs.add("quiet check after round %d: %v", round, err)
			break
		}
		if slices.Equal(before, after) {
			levels = after
			break
		}
		if try == 50 {
			r.vs.add("quiet check after round %d: levels keep changing with no call running: %v, then %v", round, before, after)
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	out := make([]int64, len(r.skus))
	for i, o := range all {
		if msg := o.observe(reads[i].info, reads[i].err); msg != "" {
			r.vs.add("order %q: %s at the quiet check after round %d; its calls:%s", o.id, msg, round, o.history())
		}
		if reads[i].err == nil && reads[i].info.State.Open() {
			for _, l := range reads[i].info.Lines {
				if j := slices.Index(r.skus, l.SKU); j >= 0 {
					out[j] += l.Qty
				}
			}
		}
	}
	restocked := make([]int64, len(r.skus))
	for _, rs := range restocks {
		info, err := inst.Order(ctx, rs.id)
		want := []stockguard.Line{{SKU: rs.sku, Qty: rs.qty}}
		switch {
		case !rs.recorded && errors.Is(err, stockguard.ErrUnknownOrder):
		case err == nil && slices.Equal(info.Lines, want),
			// A store may keep restocks out of Order: a restock is no order.
			errors.Is(err, stockguard.ErrOrderMismatch):
			// Recorded, or its only attempts gave no definite answer and
			// one applied.
			restocked[slices.Index(r.skus, rs.sku)] += rs.qty
		default:
			r.vs.add("restock %q (%v, recorded %v): Order says %v %v, %s; its calls:\n\t\t%s", rs.id, want, rs.recorded, info.State, info.Lines, answer(err), strings.Join(rs.hist, "\n\t\t"))
		}
	}
	for i, sku := range r.skus {
		if levels == nil {
			break
		}
		if levels[i] < 0 || advInitial+restocked[i] != levels[i]+out[i] {
			r.vs.add("SKU %q after round %d: initial %d + restocked %d != Stock %d + units on open orders %d (off by %d)",
				sku, round, advInitial, restocked[i], levels[i], out[i], advInitial+restocked[i]-levels[i]-out[i])
		}
	}
	for _, w := range r.workers {
		w.readSet(&advOrder{id: "SetStock " + w.setSKU})
	}
}

func levelsOf(ctx context.Context, inv stockguard.Inventory, skus []string) ([]int64, error) {
	out := make([]int64, len(skus))
	for i, sku := range skus {
		n, err := inv.Stock(ctx, sku)
		if err != nil {
			return nil, fmt.Errorf("Stock(%q): %w", sku, err)
		}
		out[i] = n
	}
	return out, nil
}

// parallel calls f(0…n-1) on up to k goroutines.
func parallel(n, k int, f func(i int)) {
	var next atomic.Int64
	var wg sync.WaitGroup
	for range min(n, k) {
		wg.Go(func() {
			for {
				i := int(next.Add(1)) - 1
				if i >= n {
					return
				}
				f(i)
			}
		})
	}
	wg.Wait()
}
