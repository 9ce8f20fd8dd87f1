package stocktest

import (
	"context"
	"errors"
	"fmt"
	mrand "math/rand/v2"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/stockguard/stockguard"
	"github.com/stockguard/stockguard/strategy"
)

// The store an Orders run works on: few shared SKUs with little stock, so
// that they sell out and refusals are common; wide SKUs with plenty, for
// the large carts; per worker a few SKUs only its orders take, whose
// levels the model knows; and holds whose TTLs end during the run.
const (
	advOrderSKUs   = 6
	advInitial     = 20
	advWideSKUs    = 48
	advWideInitial = 300
	advOwnSKUs     = 2
	advOwnInitial  = 12
	// advStopShare of the callers of a placement stop at a first answer
	// that says nothing changed.
	advStopShare = 0.5
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
	id    string
	hold  bool              // placed by Hold (when recorded)
	lines []stockguard.Line // in SKU order (when recorded)
	// states the order may be in, Held meaning held until the clock says
	// it expired: surely not before dlo-Tolerance, surely by
	// dhi+Tolerance (dlo == dhi once Order stated the deadline).
	states   stateSet
	dlo, dhi time.Time
	recorded bool
	refused  bool // the last placement was refused: nothing may be recorded
	nothing  bool // its caller stopped at "nothing changed": nothing may be recorded
	unsure   bool // the last call had attempts without a definite answer
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

// at returns the states o may be in at some moment of iv by the clock: a
// hold still Held is surely held before dlo-tol and surely expired after
// dhi+tol.
func (o *advOrder) at(tol time.Duration, iv span) stateSet {
	st := o.states
	if !st.has(stockguard.OrderHeld) {
		return st
	}
	if iv.s.After(o.dhi.Add(tol)) {
		return st&^setOf(stockguard.OrderHeld) | setOf(stockguard.OrderExpired)
	}
	if !iv.r.Before(o.dlo.Add(-tol)) {
		st |= setOf(stockguard.OrderExpired)
	}
	return st
}

// advRestock is one restock ID.
type advRestock struct {
	id       string
	sku      string
	qty      int64
	recorded bool
	hist     []string
}

// ownSKU is a SKU only one worker's orders take: its level is base minus
// the units out on the worker's open orders, base lying in lo…hi (exact
// until a SetStock lands while a hold on it may be expiring).
type ownSKU struct {
	name   string
	lo, hi int64
	sets   []string // its latest SetStock calls, for a violation's report
}

// ordersRun is one Orders run of an adversary.
type ordersRun struct {
	cfg     adversary
	insts   []stockguard.Orders
	start   time.Time
	skus    []string // every SKU orders take: shared, wide, then every worker's own
	initial []int64  // of the shared and wide ones
	shared  []string
	wide    []string
	own     map[string]*ownSKU
	ghost   string // never stocked
	started []atomic.Int64
	vs      violations
	workers []*ordersWorker
	stats   struct{ calls, tries, levels, refused, stopped, held, taken, twins atomic.Int64 }
}

// ordersWorker is one goroutine of an Orders run; it alone uses its IDs,
// its own SKUs and its SKU for SetStock, so its model of them needs no
// lock.
type ordersWorker struct {
	caller
	run       *ordersRun
	tag       string
	orders    []*advOrder
	ownOrders []*advOrder // those with a line on one of its own SKUs
	restocks  []*advRestock
	own       []*ownSKU
	setSKU    string
	level     int64
	next      int
}

func (a adversary) checkOrders(ctx context.Context, insts []stockguard.Orders) ([]Violation, string) {
	if len(insts) == 0 {
		return []Violation{{Case: "Adversary", Detail: "no instances"}}, ""
	}
	tag := runTag()
	r := &ordersRun{cfg: a, insts: insts, started: make([]atomic.Int64, advOrderSKUs), own: make(map[string]*ownSKU), ghost: "adv-ghost~" + tag}
	for i := range advOrderSKUs {
		r.shared = append(r.shared, fmt.Sprintf("adv-%d~%s", i, tag))
		r.initial = append(r.initial, advInitial)
	}
	for i := range advWideSKUs {
		r.wide = append(r.wide, fmt.Sprintf("adv-w%d~%s", i, tag))
		r.initial = append(r.initial, advWideInitial)
	}
	r.skus = append(slices.Clone(r.shared), r.wide...)
	for w := range a.Workers {
		wk := &ordersWorker{caller: newCaller(ctx, a.Seed, w, len(insts)), run: r, tag: tag}
		wk.setSKU = fmt.Sprintf("adv-set-%d~%s", w, tag)
		wk.level = int64(wk.rng.IntN(100))
		for k := range advOwnSKUs {
			o := &ownSKU{name: fmt.Sprintf("adv-own-%d-%d~%s", w, k, tag), lo: advOwnInitial, hi: advOwnInitial}
			wk.own = append(wk.own, o)
			r.own[o.name] = o
			r.skus = append(r.skus, o.name)
		}
		r.workers = append(r.workers, wk)
	}
	for i, sku := range r.skus {
		level := int64(advOwnInitial)
		if i < len(r.initial) {
			level = r.initial[i]
		}
		if err := insts[0].SetStock(ctx, sku, level); err != nil {
			return []Violation{{Case: "Adversary", Detail: fmt.Sprintf("SetStock(%q): %v", sku, err)}}, ""
		}
	}
	for _, wk := range r.workers {
		if err := insts[0].SetStock(ctx, wk.setSKU, wk.level); err != nil {
			return []Violation{{Case: "Adversary", Detail: fmt.Sprintf("SetStock(%q): %v", wk.setSKU, err)}}, ""
		}
	}
	r.start = time.Now()
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
		r.quietCheck(ctx, round, fmt.Sprintf("after round %d", round))
		if len(r.vs.list()) > 0 {
			break
		}
	}
	if a.Late > 0 && len(r.vs.list()) == 0 && ctx.Err() == nil {
		// The horizon: every attempt the network held has landed.
		select {
		case <-time.After(a.Late):
			r.quietCheck(ctx, a.Rounds, fmt.Sprintf("at the horizon (Late %v after the last call)", a.Late))
		case <-ctx.Done():
			r.vs.add("the test ended before the run did: %v", ctx.Err())
		}
	}
	st := &r.stats
	return r.vs.list(), fmt.Sprintf("%d order calls in %d attempts (%d pairs of live calls with one ID), %d SetStock and Stock calls; %d takes and %d holds acknowledged, %d refused, %d left at \"nothing changed\"",
		st.calls.Load(), st.tries.Load(), st.twins.Load(), st.levels.Load(), st.taken.Load(), st.held.Load(), st.refused.Load(), st.stopped.Load())
}

// since names a moment of the run.
func (r *ordersRun) since(t time.Time) string {
	return t.Sub(r.start).Round(10 * time.Microsecond).String()
}

func (r *ordersRun) tol() time.Duration { return r.cfg.Tolerance }

// clock describes what the clock says of o during iv, for a violation.
func (r *ordersRun) clock(o *advOrder, iv span) string {
	s := fmt.Sprintf("by the clock it is %v while the call ran, %s…%s into the run", o.at(r.tol(), iv), r.since(iv.s), r.since(iv.r))
	if o.states.has(stockguard.OrderHeld) {
		s += fmt.Sprintf(" (held until %s, expired after %s, tolerance %v)", r.since(o.dlo.Add(-r.tol())), r.since(o.dhi.Add(r.tol())), r.tol())
	}
	return s
}

// pick returns one of the worker's orders to call again: often a recent
// one, whose hold may still run.
func (w *ordersWorker) pick() *advOrder {
	if len(w.orders) == 0 {
		return nil
	}
	var o *advOrder
	if w.rng.IntN(2) == 0 {
		o = w.orders[len(w.orders)-1-w.rng.IntN(min(8, len(w.orders)))]
	} else {
		o = w.orders[w.rng.IntN(len(w.orders))]
	}
	if o.nothing {
		// Kept as its caller left it, for every later check.
		return nil
	}
	return o
}

// fresh starts a new ID.
func (w *ordersWorker) fresh() *advOrder {
	w.next++
	o := &advOrder{id: fmt.Sprintf("adv-%d-%d~%s", w.w, w.next, w.tag)}
	w.orders = append(w.orders, o)
	return o
}

// step makes one call of a random kind.
func (w *ordersWorker) step() {
	p := w.rng.IntN(100)
	o := w.pick()
	switch {
	case p < 24 || o == nil:
		w.place(w.fresh(), w.rng.IntN(2) == 0, w.cart())
	case p < 27:
		w.place(w.fresh(), w.rng.IntN(2) == 0, w.ghostCart())
	case p < 30:
		w.twin()
	case p < 38:
		w.confirm(o)
	case p < 46:
		w.ret(o)
	case p < 52:
		if o.recorded {
			w.place(o, o.hold, w.shuffled(o.lines))
		} else {
			w.place(o, w.rng.IntN(2) == 0, w.cart())
		}
	case p < 58:
		w.otherCart(o)
	case p < 62:
		w.order(o, "")
	case p < 70:
		w.nearDeadline()
	case p < 76:
		w.restock()
	case p < 80:
		w.kindProbe(o)
	case p < 90:
		w.setStock()
	default:
		w.stock()
	}
}

// cart returns 1–3 lines in random order over distinct SKUs, of 1–3 units
// each: shared SKUs, the worker's own or both; now and then a large cart
// of one unit of many SKUs.
func (w *ordersWorker) cart() []stockguard.Line {
	if w.rng.IntN(50) == 0 {
		pool := append(slices.Clone(w.run.shared), w.run.wide...)
		var lines []stockguard.Line
		// Leaving out one of them at least, for otherCart to add.
		for _, i := range w.rng.Perm(len(pool))[:8+w.rng.IntN(len(pool)-8)] {
			lines = append(lines, stockguard.Line{SKU: pool[i], Qty: 1})
		}
		return lines
	}
	var pool []string
	switch w.rng.IntN(3) {
	case 0:
		pool = w.run.shared
	case 1:
		for _, o := range w.own {
			pool = append(pool, o.name)
		}
	default:
		pool = slices.Clone(w.run.shared)
		for _, o := range w.own {
			pool = append(pool, o.name)
		}
	}
	n := 1 + w.rng.IntN(min(3, len(pool)))
	var lines []stockguard.Line
	for _, i := range w.rng.Perm(len(pool))[:n] {
		lines = append(lines, stockguard.Line{SKU: pool[i], Qty: 1 + int64(w.rng.IntN(3))})
	}
	return lines
}

// ghostCart is a cart with a line of a SKU never stocked, alone or with a
// shared SKU's.
func (w *ordersWorker) ghostCart() []stockguard.Line {
	lines := []stockguard.Line{{SKU: w.run.ghost, Qty: 1}}
	if w.rng.IntN(2) == 0 {
		lines = append(lines, stockguard.Line{SKU: w.run.shared[w.rng.IntN(len(w.run.shared))], Qty: 1})
	}
	w.rng.Shuffle(len(lines), func(i, j int) { lines[i], lines[j] = lines[j], lines[i] })
	return lines
}

func (w *ordersWorker) shuffled(lines []stockguard.Line) []stockguard.Line {
	out := slices.Clone(lines)
	w.rng.Shuffle(len(out), func(i, j int) { out[i], out[j] = out[j], out[i] })
	return out
}

func (w *ordersWorker) fail(o *advOrder, format string, args ...any) {
	w.run.vs.add("order %q: %s; its calls (worker %d):%s", o.id, fmt.Sprintf(format, args...), w.w, o.history())
}

func (r *ordersRun) tries(ts []attempt) string {
	parts := make([]string, len(ts))
	for i, t := range ts {
		parts[i] = fmt.Sprintf("%s@%s", t, r.since(t.sent))
	}
	return strings.Join(parts, "; ")
}

// call repeats f until a definite answer (or, with stop, a first answer
// that says nothing changed) and notes it on o. ok is false when there
// was none (noted as a violation unless the test ended).
func (w *ordersWorker) call(o *advOrder, stop bool, what string, f func(ctx context.Context, inst stockguard.Orders) error) (iv span, ok bool, err error) {
	w.run.stats.calls.Add(1)
	ts, ok, err := w.repeat(stop, func(ctx context.Context, i int) error { return f(ctx, w.run.insts[i]) })
	w.run.stats.tries.Add(int64(len(ts)))
	o.note("%s → %s", what, w.run.tries(ts))
	o.unsure = len(ts) > 1
	if !ok {
		if w.ctx.Err() == nil {
			w.fail(o, "%s: no definite answer in %d attempts", what, maxAttempts)
		}
		return span{}, false, err
	}
	return spanOf(ts), true, err
}

func isRefusal(err error) bool {
	return errors.Is(err, stockguard.ErrInsufficientStock) || errors.Is(err, stockguard.ErrUnknownSKU)
}

// shelf returns the bounds of own's level during iv, as the worker's
// orders other than skip allow.
func (w *ordersWorker) shelf(own *ownSKU, iv span, skip *advOrder) (lo, hi int64) {
	lo, hi = own.lo, own.hi
	for _, o := range w.ownOrders {
		if o == skip || !o.recorded {
			continue
		}
		q := qtyOf(o.lines, own.name)
		st := o.at(w.run.tol(), iv)
		if st&setOpen != 0 {
			lo -= q // out at some moment
		}
		if st&setClosed == 0 {
			hi -= q // out all along
		}
	}
	return lo, hi
}

// ordersOf lists the last n of the worker's orders whose calls named sku,
// recorded or not, each with what the model holds of it and its calls.
func (w *ordersWorker) ordersOf(sku string, n int) string {
	var b strings.Builder
	for i := len(w.orders) - 1; i >= 0 && n > 0; i-- {
		o := w.orders[i]
		if !slices.ContainsFunc(o.hist, func(h string) bool { return strings.Contains(h, sku) }) {
			continue
		}
		n--
		fmt.Fprintf(&b, "\n\torder %q (%v):%s", o.id, o, o.history())
	}
	return b.String()
}

func qtyOf(lines []stockguard.Line, sku string) int64 {
	for _, l := range lines {
		if l.SKU == sku {
			return l.Qty
		}
	}
	return 0
}

// checkShelf checks the answer to a placement under an ID not recorded
// against the stock model: a refusal of a cart of the worker's own SKUs
// whose every line had the units all along is wrong, and so is a cart
// taken with a line the level never had.
func (w *ordersWorker) checkShelf(o *advOrder, lines []stockguard.Line, err error, iv span) {
	enough, short := true, ""
	for _, l := range lines {
		own := w.run.own[l.SKU]
		if own == nil {
			enough = false
			continue
		}
		lo, hi := w.shelf(own, iv, o)
		enough = enough && lo >= l.Qty
		if hi < l.Qty {
			short = fmt.Sprintf("%d of %q, which had at most %d", l.Qty, l.SKU, hi)
		}
	}
	switch {
	case errors.Is(err, stockguard.ErrInsufficientStock) && enough:
		var levels []string
		for _, l := range lines {
			lo, hi := w.shelf(w.run.own[l.SKU], iv, o)
			levels = append(levels, fmt.Sprintf("%q %d…%d", l.SKU, lo, hi))
		}
		w.fail(o, "refused (%s) with the units on the shelf: %v asked, levels by the model %s", answer(err), lines, strings.Join(levels, ", "))
	case err == nil && short != "":
		w.fail(o, "acknowledged, but took %s", short)
	}
}

// place takes or holds lines, in the order given, under o's ID and checks
// the answer against what o's history and the model allow.
func (w *ordersWorker) place(o *advOrder, hold bool, lines []stockguard.Line) {
	sorted := strategy.SortedLines(lines)
	ttl := advTTLs[w.rng.IntN(len(advTTLs))]
	what := fmt.Sprintf("Take(%v)", lines)
	if hold {
		what = fmt.Sprintf("Hold(%v, %v)", ttl, lines)
	}
	stop := !o.recorded && w.rng.Float64() < advStopShare
	iv, ok, err := w.call(o, stop, what, func(ctx context.Context, inst stockguard.Orders) error {
		if hold {
			return inst.Hold(ctx, o.id, ttl, lines...)
		}
		return inst.Take(ctx, o.id, lines...)
	})
	if !ok {
		return
	}
	ghost := slices.ContainsFunc(lines, func(l stockguard.Line) bool { return l.SKU == w.run.ghost })
	same := o.recorded && o.hold == hold && slices.Equal(o.lines, sorted)
	switch {
	case !o.recorded:
		switch {
		case nothingChanged(err):
			w.run.stats.stopped.Add(1)
			o.nothing, o.refused = true, false
			w.order(o, "right after its caller was told nothing changed")
		case ghost:
			if err == nil || !isRefusal(err) || errors.Is(err, stockguard.ErrInsufficientStock) && len(lines) == 1 {
				w.fail(o, "a cart with a SKU never stocked answered %s, want %s", answer(err), stockguard.ErrUnknownSKU)
			}
			o.refused = true
			w.order(o, "right after its refusal")
		case err == nil:
			w.checkShelf(o, sorted, err, iv)
			o.recorded, o.refused, o.hold, o.lines = true, false, hold, sorted
			o.states = setOf(stockguard.OrderTaken)
			if hold {
				o.states = setOf(stockguard.OrderHeld)
				o.dlo, o.dhi = iv.s.Add(ttl), iv.r.Add(ttl)
				w.run.stats.held.Add(1)
			} else {
				w.run.stats.taken.Add(1)
			}
			w.noteOwn(o)
		case errors.Is(err, stockguard.ErrOrderClosed) && o.unsure:
			// An abandoned attempt applied it, and it closed since: a hold
			// expired (nothing returns an order the model does not know).
			o.recorded, o.refused, o.hold, o.lines = true, false, hold, sorted
			o.states = setOf(stockguard.OrderExpired)
			switch {
			case !hold:
				w.fail(o, "a take answered %s: nothing returned it", answer(err))
			case iv.r.Before(iv.s.Add(ttl - w.run.tol())):
				w.fail(o, "a hold answered %s %s after its first attempt was sent, but by the clock it is held for %v, give or take %v",
					answer(err), iv.r.Sub(iv.s), ttl, w.run.tol())
			}
		case errors.Is(err, stockguard.ErrUnknownSKU):
			w.fail(o, "refused with %s, but every SKU of its cart is a stocked SKU", answer(err))
			o.refused = true
		case isRefusal(err):
			w.run.stats.refused.Add(1)
			w.checkShelf(o, sorted, err, iv)
			o.refused = true
			w.order(o, "right after its refusal")
		default:
			w.fail(o, "a placement under an ID never recorded answered %s", answer(err))
		}
	case same:
		st := o.at(w.run.tol(), iv)
		switch {
		case err == nil:
			if st&setOpen == 0 {
				w.fail(o, "a repeat answered nil, but %s", w.run.clock(o, iv))
			}
			o.states &= setOpen
		case errors.Is(err, stockguard.ErrOrderClosed):
			if st&setClosed == 0 {
				w.fail(o, "a repeat answered %s, but %s", answer(err), w.run.clock(o, iv))
			}
			o.states = st & setClosed
		case isRefusal(err):
			w.fail(o, "a repeat of a recorded order was refused (%s): it was applied and the buyer is told no", answer(err))
		default:
			w.fail(o, "a repeat with the same cart answered %s", answer(err))
		}
	default: // another cart or kind under a recorded ID
		if !errors.Is(err, stockguard.ErrOrderMismatch) {
			w.fail(o, "another cart or kind under a recorded ID (%v, recorded %v) answered %s, want ErrOrderMismatch (%s)", sorted, o, answer(err), stockguard.ErrOrderMismatch)
		}
	}
}

// noteOwn keeps o among the orders the stock model counts when it has a
// line on one of the worker's own SKUs.
func (w *ordersWorker) noteOwn(o *advOrder) {
	// A closed order stays closed: it counts no more.
	w.ownOrders = slices.DeleteFunc(w.ownOrders, func(o *advOrder) bool { return o.states&setOpen == 0 })
	if slices.ContainsFunc(o.lines, func(l stockguard.Line) bool { return w.run.own[l.SKU] != nil }) && !slices.Contains(w.ownOrders, o) {
		w.ownOrders = append(w.ownOrders, o)
	}
}

// otherCart repeats o's ID with another cart: for a recorded order a
// mismatch (a line's quantity changed, a line dropped, added or swapped
// for another SKU's, or the other kind), for a refused one a fresh
// placement.
func (w *ordersWorker) otherCart(o *advOrder) {
	if !o.recorded {
		w.place(o, w.rng.IntN(2) == 0, w.cart())
		return
	}
	lines := slices.Clone(o.lines)
	hold := o.hold
	// A shared or wide SKU not in the cart: no cart takes all of them.
	unused := func() string {
		pool := append(slices.Clone(w.run.shared), w.run.wide...)
		for _, i := range w.rng.Perm(len(pool)) {
			if qtyOf(lines, pool[i]) == 0 {
				return pool[i]
			}
		}
		panic("stocktest: a cart holds every SKU")
	}
	i := w.rng.IntN(len(lines))
	switch p := w.rng.IntN(5); {
	case p == 0:
		hold = !hold
	case p == 1 && len(lines) > 1:
		lines = slices.Delete(lines, i, i+1)
	case p == 2:
		lines = append(lines, stockguard.Line{SKU: unused(), Qty: lines[i].Qty})
	case p == 3:
		lines[i].SKU = unused()
	default:
		lines[i].Qty++
	}
	w.place(o, hold, w.shuffled(lines))
}

func (w *ordersWorker) confirm(o *advOrder) {
	iv, ok, err := w.call(o, false, "Confirm", func(ctx context.Context, inst stockguard.Orders) error { return inst.Confirm(ctx, o.id) })
	if !ok {
		return
	}
	st := o.at(w.run.tol(), iv)
	switch {
	case err == nil:
		if !o.recorded || st&setOpen == 0 {
			w.fail(o, "Confirm answered nil, but the order is %v: %s", o, w.run.clock(o, iv))
		}
		o.states = setOf(stockguard.OrderTaken)
	case errors.Is(err, stockguard.ErrOrderClosed):
		if !o.recorded || st&setClosed == 0 {
			w.fail(o, "Confirm answered %s, but the order is %v: %s", answer(err), o, w.run.clock(o, iv))
		}
		o.states = st & setClosed
	case errors.Is(err, stockguard.ErrUnknownOrder):
		if o.recorded {
			w.fail(o, "Confirm answered %s, but the order is %v", answer(err), o)
		}
	default:
		w.fail(o, "Confirm answered %s", answer(err))
	}
}

func (w *ordersWorker) ret(o *advOrder) {
	iv, ok, err := w.call(o, false, "Return", func(ctx context.Context, inst stockguard.Orders) error { return inst.Return(ctx, o.id) })
	if !ok {
		return
	}
	switch {
	case err == nil:
		if !o.recorded {
			w.fail(o, "Return answered nil, but the order is %v", o)
		}
		st := o.at(w.run.tol(), iv)
		next := st & setClosed
		if st&setOpen != 0 {
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

// nearDeadline reads or confirms a recent hold whose deadline is near,
// where a store that expires holds early or late goes wrong.
func (w *ordersWorker) nearDeadline() {
	now, margin := time.Now(), 4*w.run.tol()
	for i := len(w.orders) - 1; i >= max(0, len(w.orders)-64); i-- {
		o := w.orders[i]
		if o.states.has(stockguard.OrderHeld) && now.After(o.dlo.Add(-margin)) && now.Before(o.dhi.Add(margin)) {
			if w.rng.IntN(3) == 0 {
				w.confirm(o)
			} else {
				w.order(o, "near its deadline")
			}
			return
		}
	}
	if o := w.pick(); o != nil {
		w.order(o, "")
	}
}

// order reads o's record and checks it against the model; when says
// why it is read at that moment.
func (w *ordersWorker) order(o *advOrder, when string) {
	var info stockguard.OrderInfo
	iv, ok, err := w.call(o, false, "Order", func(ctx context.Context, inst stockguard.Orders) error {
		var err error
		info, err = inst.Order(ctx, o.id)
		return err
	})
	if !ok {
		return
	}
	if err == nil {
		d := ""
		if !info.Deadline.IsZero() {
			d = ", deadline " + w.run.since(info.Deadline)
		}
		o.hist[len(o.hist)-1] += fmt.Sprintf(" (%v %v%s)", info.State, info.Lines, d)
	}
	if msg := w.run.observe(o, info, err, iv); msg != "" {
		if when != "" {
			msg += " " + when
		}
		w.fail(o, "%s", msg)
	}
}

// observe checks one answer of Order, read during iv, against o, narrows
// o to it, and returns what is wrong ("" when nothing is).
func (r *ordersRun) observe(o *advOrder, info stockguard.OrderInfo, err error, iv span) string {
	switch {
	case err == nil:
		if !o.recorded {
			switch {
			case o.nothing:
				return fmt.Sprintf("its caller was told nothing changed, yet Order says %v %v", info.State, info.Lines)
			case o.refused:
				return fmt.Sprintf("refused, yet recorded: Order says %v %v", info.State, info.Lines)
			}
			return fmt.Sprintf("never applied, yet Order says %v %v", info.State, info.Lines)
		}
		if !slices.Equal(info.Lines, o.lines) {
			return fmt.Sprintf("recorded with lines %v, but Order says %v", o.lines, info.Lines)
		}
		st := o.at(r.tol(), iv)
		if !st.has(info.State) {
			return fmt.Sprintf("%s, but Order says %v", r.clock(o, iv), info.State)
		}
		if o.states.has(stockguard.OrderHeld) && info.State == stockguard.OrderHeld {
			// The store's deadline, set when the applying attempt ran: in
			// the window the clock allows, and from now on the one used.
			switch d := info.Deadline; {
			case d.IsZero():
				return "Order says held, with no deadline"
			case d.Before(o.dlo.Add(-r.tol())) || d.After(o.dhi.Add(r.tol())):
				return fmt.Sprintf("Order says the hold's deadline is %s into the run, but by the clock its calls set it within %s…%s (tolerance %v)",
					r.since(d), r.since(o.dlo), r.since(o.dhi), r.tol())
			}
			o.dlo, o.dhi = info.Deadline, info.Deadline
		}
		o.states = setOf(info.State)
	case errors.Is(err, stockguard.ErrUnknownOrder):
		if o.recorded {
			return fmt.Sprintf("acknowledged as %v, but Order says %s", o, answer(err))
		}
	default:
		return fmt.Sprintf("Order answered %s", answer(err))
	}
	return ""
}

// twin places one fresh ID from two live calls at once, with the same
// cart or two different ones: both answers must agree with one history,
// in which one of them applied the ID or none did.
func (w *ordersWorker) twin() {
	w.run.stats.twins.Add(1)
	o := w.fresh()
	hold := w.rng.IntN(2) == 0
	ttl := advTTLs[w.rng.IntN(len(advTTLs))]
	carts := [2][]stockguard.Line{w.cart(), nil}
	carts[1] = w.shuffled(carts[0])
	if w.rng.IntN(2) == 0 {
		carts[1] = w.cart()
	}
	sameCart := slices.Equal(strategy.SortedLines(carts[0]), strategy.SortedLines(carts[1]))
	type result struct {
		ts  []attempt
		ok  bool
		err error
	}
	var res [2]result
	var wg sync.WaitGroup
	for i := range res {
		c := w.caller
		c.rng = mrand.New(mrand.NewPCG(w.rng.Uint64(), w.rng.Uint64()))
		wg.Go(func() {
			res[i].ts, res[i].ok, res[i].err = c.repeat(false, func(ctx context.Context, inst int) error {
				if hold {
					return w.run.insts[inst].Hold(ctx, o.id, ttl, carts[i]...)
				}
				return w.run.insts[inst].Take(ctx, o.id, carts[i]...)
			})
		})
	}
	wg.Wait()
	w.run.stats.calls.Add(2)
	iv := span{}
	for i, rs := range res {
		w.run.stats.tries.Add(int64(len(rs.ts)))
		kind := "Take"
		if hold {
			kind = fmt.Sprintf("Hold(%v)", ttl)
		}
		o.note("live call %d of 2: %s(%v) → %s", i+1, kind, carts[i], w.run.tries(rs.ts))
		if !rs.ok {
			if w.ctx.Err() == nil {
				w.fail(o, "live call %d of 2: no definite answer in %d attempts", i+1, maxAttempts)
			}
			return
		}
		sp := spanOf(rs.ts)
		if iv.s.IsZero() || sp.s.Before(iv.s) {
			iv.s = sp.s
		}
		if sp.r.After(iv.r) {
			iv.r = sp.r
		}
	}
	// Which cart is recorded: one acknowledged or closed, or the one the
	// other call was told it mismatches.
	claimed := [2]bool{}
	for i, rs := range res {
		switch err := rs.err; {
		case err == nil, errors.Is(err, stockguard.ErrOrderClosed):
			claimed[i] = true
		case errors.Is(err, stockguard.ErrOrderMismatch):
			if sameCart {
				w.fail(o, "two live calls with one ID and one cart: one answered %s", answer(err))
				return
			}
			claimed[1-i] = true
		case isRefusal(err):
		default:
			w.fail(o, "live call %d of 2 answered %s", i+1, answer(err))
			return
		}
	}
	switch {
	case claimed[0] && claimed[1] && !sameCart:
		w.fail(o, "two live calls with one ID and two carts: both were applied, by their answers %s and %s", answer(res[0].err), answer(res[1].err))
		return
	case !claimed[0] && !claimed[1]:
		o.refused = true
		w.order(o, "after two live calls with its ID were refused")
		return
	}
	j := 0
	if !claimed[0] {
		j = 1
	}
	if isRefusal(res[j].err) && !sameCart {
		w.fail(o, "live call %d of 2 was refused (%s), yet the other was told its ID holds that cart", j+1, answer(res[j].err))
		return
	}
	o.recorded, o.hold, o.lines = true, hold, strategy.SortedLines(carts[j])
	o.states = setOf(stockguard.OrderTaken)
	if hold {
		o.states = setOf(stockguard.OrderHeld)
		o.dlo, o.dhi = iv.s.Add(ttl), iv.r.Add(ttl)
	}
	w.noteOwn(o)
	w.order(o, "after two live calls with its ID")
}

// restock adds units under a new restock ID, or repeats an old one with
// the same or another quantity.
func (w *ordersWorker) restock() {
	p := w.rng.IntN(10)
	var r *advRestock
	switch {
	case p < 6 || len(w.restocks) == 0:
		w.next++
		i := w.rng.IntN(len(w.run.shared))
		r = &advRestock{id: fmt.Sprintf("adv-rs-%d-%d~%s", w.w, w.next, w.tag), sku: w.run.shared[i], qty: 1 + int64(w.rng.IntN(5))}
		w.restocks = append(w.restocks, r)
		w.run.started[i].Add(r.qty)
	default:
		r = w.restocks[w.rng.IntN(len(w.restocks))]
	}
	qty := r.qty
	if p == 9 && r.recorded {
		qty++
	}
	o := &advOrder{id: r.id, hist: r.hist}
	_, ok, err := w.call(o, false, fmt.Sprintf("Restock(%q, %d)", r.sku, qty), func(ctx context.Context, inst stockguard.Orders) error {
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
// order's ID, or Confirm, Return, Take or Hold under a restock's ID. Each
// is a mismatch once the first is recorded.
func (w *ordersWorker) kindProbe(o *advOrder) {
	if w.rng.IntN(2) == 0 && o.recorded {
		l := o.lines[w.rng.IntN(len(o.lines))]
		_, ok, err := w.call(o, false, fmt.Sprintf("Restock(%q, %d) under the order's ID", l.SKU, l.Qty), func(ctx context.Context, inst stockguard.Orders) error {
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
	line := stockguard.Line{SKU: r.sku, Qty: r.qty}
	probes := []struct {
		what string
		f    func(ctx context.Context, inst stockguard.Orders) error
	}{
		{"Confirm", func(ctx context.Context, inst stockguard.Orders) error { return inst.Confirm(ctx, r.id) }},
		{"Return", func(ctx context.Context, inst stockguard.Orders) error { return inst.Return(ctx, r.id) }},
		{fmt.Sprintf("Take(%v)", line), func(ctx context.Context, inst stockguard.Orders) error { return inst.Take(ctx, r.id, line) }},
		{fmt.Sprintf("Hold(1s, %v)", line), func(ctx context.Context, inst stockguard.Orders) error {
			return inst.Hold(ctx, r.id, time.Second, line)
		}},
	}
	p := probes[w.rng.IntN(len(probes))]
	ro := &advOrder{id: r.id, hist: r.hist}
	_, ok, err := w.call(ro, false, p.what+" under a restock's ID", p.f)
	r.hist = ro.hist
	if ok && !errors.Is(err, stockguard.ErrOrderMismatch) {
		w.fail(ro, "%s under a restock's ID answered %s, want %s", p.what, answer(err), stockguard.ErrOrderMismatch)
	}
}

// setStock overwrites the worker's own SKU for SetStock and reads it
// back, or one of its SKUs its orders take, whose model then counts from
// the level set.
func (w *ordersWorker) setStock() {
	if w.rng.IntN(2) == 0 {
		w.setOwn(w.own[w.rng.IntN(len(w.own))])
		return
	}
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

// setOwn sets one of the worker's own SKUs: from then on its level is the
// one set, less the units its orders take and plus those they give back
// (the units out when it landed are back on top of it when they return).
func (w *ordersWorker) setOwn(own *ownSKU) {
	level := int64(w.rng.IntN(2 * advOwnInitial))
	a := w.patiently(func(ctx context.Context, i int) error { return w.run.insts[i].SetStock(ctx, own.name, level) })
	w.run.stats.levels.Add(1)
	if a.err != nil {
		if w.ctx.Err() == nil {
			w.run.vs.add("SetStock(%q, %d) answered %s", own.name, level, answer(a.err))
		}
		return
	}
	// base = level + the units out when it landed: the model's bounds of
	// those give the bounds of base.
	own.lo, own.hi = level, level
	lo, hi := w.shelf(own, span{a.sent, a.ret}, nil)
	own.lo, own.hi = 2*level-hi, 2*level-lo
	own.sets = append(own.sets[max(0, len(own.sets)-3):], fmt.Sprintf("SetStock(%d) → %s@%s, model %d…%d", level, a, w.run.since(a.sent), own.lo, own.hi))
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

// stock reads a SKU while others take and restock it: a shared or wide
// SKU's level is no more than its initial stock and every restock begun
// so far, one of the worker's own SKUs lies where the model allows, and a
// SKU never stocked is unknown and stays so.
func (w *ordersWorker) stock() {
	var sku string
	var own *ownSKU
	i := -1
	switch p := w.rng.IntN(10); {
	case p == 0:
		sku = w.run.ghost
	case p < 4:
		own = w.own[w.rng.IntN(len(w.own))]
		sku = own.name
	default:
		i = w.rng.IntN(len(w.run.initial))
		sku = w.run.skus[i]
	}
	var got int64
	a := w.patiently(func(ctx context.Context, inst int) error {
		var err error
		got, err = w.run.insts[inst].Stock(ctx, sku)
		return err
	})
	if w.ctx.Err() != nil {
		return
	}
	w.run.stats.levels.Add(1)
	switch {
	case sku == w.run.ghost:
		if !errors.Is(a.err, stockguard.ErrUnknownSKU) {
			w.run.vs.add("Stock(%q), never stocked, answered %d, %s; want %s", sku, got, answer(a.err), stockguard.ErrUnknownSKU)
		}
	case own != nil:
		lo, hi := w.shelf(own, span{a.sent, a.ret}, nil)
		if a.err != nil || got < max(lo, 0) || got > hi {
			w.run.vs.add("Stock(%q) = %d, %s@%s; its only buyer's model allows %d…%d; its latest SetStock calls:\n\t%s\n\tits latest orders:%s",
				sku, got, answer(a.err), w.run.since(a.sent), max(lo, 0), hi, strings.Join(own.sets, "\n\t"), w.ordersOf(sku, 6))
		}
	default:
		ceiling := w.run.initial[i]
		if i < advOrderSKUs {
			ceiling += w.run.started[i].Load()
		}
		if a.err != nil || got < 0 || got > ceiling {
			w.run.vs.add("Stock(%q) = %d, %s; want 0…%d (initial and every restock begun)", sku, got, answer(a.err), ceiling)
		}
	}
}

// quietCheck compares the store with the model while no call runs.
func (r *ordersRun) quietCheck(ctx context.Context, round int, when string) {
	if r.cfg.Quiet != nil {
		skus := slices.Clone(r.skus)
		for _, w := range r.workers {
			skus = append(skus, w.setSKU)
		}
		if err := r.cfg.Quiet(ctx, skus); err != nil {
			r.vs.add("Quiet %s: %v", when, err)
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
	var iv span
	readOrders := func() {
		reads = make([]read, len(all))
		parallel(len(all), r.cfg.Workers, func(i int) {
			reads[i].info, reads[i].err = inst.Order(ctx, all[i].id)
		})
	}
	for try := 0; ; try++ {
		iv.s = time.Now()
		before, err := levelsOf(ctx, inst, r.skus)
		readOrders()
		if err != nil {
			r.vs.add("quiet check %s: %v", when, err)
			break
		}
		after, err := levelsOf(ctx, inst, r.skus)
		iv.r = time.Now()
		if err != nil {
			r.vs.add("quiet check %s: %v", when, err)
			break
		}
		if slices.Equal(before, after) {
			levels = after
			break
		}
		if try == 50 {
			r.vs.add("quiet check %s: levels keep changing with no call running: %v, then %v", when, before, after)
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	out := make([]int64, len(r.skus))
	for i, o := range all {
		if msg := r.observe(o, reads[i].info, reads[i].err, iv); msg != "" {
			r.vs.add("order %q: %s at the quiet check %s; its calls:%s", o.id, msg, when, o.history())
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
		if own := r.own[sku]; own != nil {
			// Exact from here on: the level read and the units out.
			if base := levels[i] + out[i]; levels[i] < 0 || base < own.lo || base > own.hi {
				r.vs.add("SKU %q %s: Stock %d + units on open orders %d = %d, but its only buyer's model allows %d…%d",
					sku, when, levels[i], out[i], base, own.lo, own.hi)
			}
			own.lo, own.hi = levels[i]+out[i], levels[i]+out[i]
			continue
		}
		if levels[i] < 0 || r.initial[i]+restocked[i] != levels[i]+out[i] {
			r.vs.add("SKU %q %s: initial %d + restocked %d != Stock %d + units on open orders %d (off by %d)",
				sku, when, r.initial[i], restocked[i], levels[i], out[i], r.initial[i]+restocked[i]-levels[i]-out[i])
		}
	}
	if _, err := inst.Stock(ctx, r.ghost); !errors.Is(err, stockguard.ErrUnknownSKU) {
		r.vs.add("Stock(%q), never stocked, answered %s %s; want %s", r.ghost, answer(err), when, stockguard.ErrUnknownSKU)
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
