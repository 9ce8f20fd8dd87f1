package bench

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/stockguard/stockguard"
)

// ErrSkipped is wrapped by Run's error when a target cannot run the
// workload at all — a Checkout on a target whose instances do not implement
// stockguard.Orders, or a checkout counterexample under another workload.
// Nothing was measured; it is not a failure of the target.
var ErrSkipped = errors.New("skipped")

// maxResolve bounds how often a call that ended ErrOutcomeUnknown is
// repeated, with the same ID and arguments, to learn its outcome.
const maxResolve = 6

// restockFactor sizes a restock: this many times the largest line.
const restockFactor = 10

// stateSet is a set of order states an audited order may be found in; the
// bit stateNone stands for "no order under that ID".
type stateSet uint8

const stateNone stockguard.OrderState = 0

func states(s ...stockguard.OrderState) stateSet {
	var set stateSet
	for _, st := range s {
		set |= 1 << st
	}
	return set
}

func (s stateSet) has(st stockguard.OrderState) bool { return s&(1<<st) != 0 }

// anyClosed is what an order whose outcome stayed unknown may be found in
// once every hold's deadline has passed: anything but held.
var anyClosed = states(stateNone, stockguard.OrderTaken, stockguard.OrderReturned, stockguard.OrderExpired)

// lateCall is what the audit does to a hold left to expire, once its
// deadline has passed: nothing, Return (must answer nil and give nothing
// back) or Confirm (must answer ErrOrderClosed).
type lateCall int8

const (
	lateNone lateCall = iota
	lateReturn
	lateConfirm
)

// placed is an order a worker may have applied, with the states the audit
// may find it in.
type placed struct {
	seq   uint64
	lines []stockguard.Line
	want  stateSet
	// acked marks an order whose Take or Hold was acknowledged, hold one
	// placed by Hold; late is the audit's call after its deadline.
	acked, hold bool
	late        lateCall
	// unresolved counts its calls whose outcome stayed unknown after the
	// repeats; the audit's Order tells what became of them. placedUnknown
	// marks an order whose own Take or Hold stayed unknown.
	unresolved    int8
	placedUnknown bool
}

// checkout is the Checkout state of a run.
type checkout struct {
	// tag makes the run's IDs unique across runs on a shared backend.
	tag     string
	soldOut int // index of the SKU with no stock, -1 when carts are never short
	// restocked holds the units of acknowledged restocks per SKU; the
	// restocks whose outcome the workers did not learn are in their
	// orderWorker's unsettled, for the audit to repeat.
	restocked []atomic.Int64
}

// restockCall is a restock whose outcome its worker did not learn.
type restockCall struct {
	seq uint64
	sku int
	qty int64
}

func newCheckout(n int) *checkout {
	var b [4]byte
	rand.Read(b[:]) // documented never to return an error
	return &checkout{
		tag: hex.EncodeToString(b[:]), soldOut: -1,
		restocked: make([]atomic.Int64, n),
	}
}

// orderWorker is a worker's Checkout state.
type orderWorker struct {
	ord    stockguard.Orders
	id     int
	seq    uint64
	placed []placed
	// unsettled holds the restocks that ended neither applied nor refused.
	unsettled []restockCall
	// deadline is the latest end of a hold this worker placed, since
	// run.base (client clock, plus the audit's margin covers the backend's).
	deadline time.Duration
	// unknown counts calls that ended ErrOutcomeUnknown; reconciled those
	// whose outcome a repeat of the call then told.
	unknown, reconciled int64
	lines               int64 // lines of measured successful orders
	cart                []int
	pending             int8 // calls of the current follow-up that stayed unknown
}

// orderID returns the ID of a worker's seq-th operation.
func (c *checkout) orderID(worker int, seq uint64) string {
	return c.tag + "-" + strconv.Itoa(worker) + "-" + strconv.FormatUint(seq, 10)
}

// resolve makes call and, while it ends ErrOutcomeUnknown, repeats it
// (the same ID and arguments, so at most once in effect) a bounded number
// of times. It returns the last result.
func (ow *orderWorker) resolve(ctx context.Context, call func(context.Context) error) (err error) {
	err = call(ctx)
	if Classify(err) != KindOutcomeUnknown {
		return err
	}
	ow.unknown++
	defer func() {
		if Classify(err) == KindOutcomeUnknown {
			ow.pending++
		}
	}()
	// The run's context may end meanwhile; learning the outcome must not.
	ctx = context.WithoutCancel(ctx)
	for i := range maxResolve {
		time.Sleep(time.Millisecond << i)
		if err = call(ctx); Classify(err) != KindOutcomeUnknown {
			ow.reconciled++
			return err
		}
	}
	return err
}

// pickCart fills ow.cart with the SKU indexes of the next order: 1…Lines
// distinct SKUs by the workload's skew, the last one the sold-out SKU for a
// short cart (which has at least one sale SKU besides, also when there is
// only one).
func (wk *worker) pickCart() []int {
	r, m, ow := wk.r, wk.r.w.Orders, wk.ow
	n := min(1+wk.rng.IntN(m.Lines), r.sale+1)
	short := r.co.soldOut >= 0 && n >= 2 && wk.rng.Float64() < m.ShortShare
	if short {
		n--
	}
	n = min(n, r.sale)
	cart := ow.cart[:0]
	for len(cart) < n {
		i := wk.pick()
		for try := 0; contains(cart, i); try++ {
			if try > 8 {
				// A skewed draw keeps hitting the hot SKUs: take the
				// first one not in the cart yet.
				for i = 0; contains(cart, i); i++ {
				}
				break
			}
			i = wk.pick()
		}
		cart = append(cart, i)
	}
	if short {
		cart = append(cart, r.co.soldOut)
	}
	ow.cart = cart
	return cart
}

func contains(s []int, v int) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

// ordersLoop is loop for a Checkout: each iteration is a restock or an
// order and its follow-up. Only the order's own call (Take or Hold, with
// the repeats that resolve an unknown outcome) is timed.
func (wk *worker) ordersLoop(ctx context.Context) {
	r, ow, mix := wk.r, wk.ow, wk.r.w.Orders
	prev := time.Since(r.base)
	for {
		ph := r.phase.Load()
		if ph == phaseStop {
			return
		}
		ow.seq++
		id := r.co.orderID(ow.id, ow.seq)
		if wk.rng.Float64() < mix.RestockShare {
			wk.restock(ctx, id)
			prev = time.Since(r.base)
			continue
		}
		cart := wk.pickCart()
		lines := make([]stockguard.Line, len(cart))
		for j, i := range cart {
			lines[j] = stockguard.Line{SKU: r.skus[i], Qty: wk.qty()}
		}
		hold := wk.rng.Float64() < mix.HoldShare
		ow.pending = 0
		var err error
		if hold {
			issued := time.Since(r.base)
			err = ow.resolve(ctx, func(ctx context.Context) error { return ow.ord.Hold(ctx, id, mix.HoldTTL, lines...) })
			ow.deadline = max(ow.deadline, issued+mix.HoldTTL)
		} else {
			err = ow.resolve(ctx, func(ctx context.Context) error { return ow.ord.Take(ctx, id, lines...) })
		}
		now := time.Since(r.base)
		lat := int64(now - prev)

		m := 0
		if ph == phaseMeasure {
			m = 1
		}
		k := Classify(err)
		wk.counts[m][k]++
		switch k {
		case KindOK:
			want, late := wk.followUp(ctx, id, hold)
			ow.placed = append(ow.placed, placed{seq: ow.seq, lines: lines, want: want, unresolved: ow.pending,
				acked: true, hold: hold, late: late})
		case KindInsufficient, KindUnknownSKU:
			// Refused whole: the audit must find no order under the ID.
			ow.placed = append(ow.placed, placed{seq: ow.seq, lines: lines, want: states(stateNone)})
		case KindOutcomeUnknown:
			ow.placed = append(ow.placed, placed{seq: ow.seq, lines: lines, want: anyClosed, unresolved: 1, placedUnknown: true})
		case KindOther, KindCanceled:
			// It may have been applied: the audit asks Order.
			ow.placed = append(ow.placed, placed{seq: ow.seq, lines: lines, want: anyClosed})
		case KindOrderClosed:
			// A repeat found the order applied and already closed.
			ow.placed = append(ow.placed, placed{seq: ow.seq, lines: lines,
				want: states(stockguard.OrderReturned, stockguard.OrderExpired)})
		}
		if k == KindOther && len(wk.others) < maxSamples {
			wk.others = appendSamples(wk.others, err.Error())
		}
		prev = time.Since(r.base)
		if m == 0 {
			continue
		}
		wk.hist.RecordValue(min(lat, maxTracked))
		wk.max = max(wk.max, lat)
		wk.attempts++
		wk.lastEnd = now
		if k == KindOK {
			ow.lines += int64(len(lines))
			for _, l := range lines {
				wk.units += l.Qty
			}
			wk.lastSuccess = now
		}
		if wk.quota > 0 {
			if wk.quota--; wk.quota == 0 {
				return
			}
		}
	}
}

// followUp does what the buyer does after an acknowledged order and
// returns the states the audit may find the order in, and for a hold left
// to expire the audit's call after its deadline (a third each: none,
// Return, Confirm).
func (wk *worker) followUp(ctx context.Context, id string, hold bool) (stateSet, lateCall) {
	ow, mix := wk.ow, wk.r.w.Orders
	ret := func(ctx context.Context) error { return ow.ord.Return(ctx, id) }
	if !hold {
		if wk.rng.Float64() >= mix.ReturnShare {
			return states(stockguard.OrderTaken), lateNone
		}
		if ow.resolve(ctx, ret) == nil {
			return states(stockguard.OrderReturned), lateNone
		}
		return states(stockguard.OrderTaken, stockguard.OrderReturned), lateNone
	}
	switch wk.rng.IntN(3) {
	case 0:
		err := ow.resolve(ctx, func(ctx context.Context) error { return ow.ord.Confirm(ctx, id) })
		switch {
		case err == nil:
			return states(stockguard.OrderTaken), lateNone
		case errors.Is(err, stockguard.ErrOrderClosed):
			return states(stockguard.OrderExpired), lateNone // the deadline came first
		}
		return states(stockguard.OrderTaken, stockguard.OrderExpired), lateNone
	case 1:
		// Returned, or expired when the deadline came first (Return
		// answers nil for both).
		ow.resolve(ctx, ret)
		return states(stockguard.OrderReturned, stockguard.OrderExpired), lateNone
	}
	return states(stockguard.OrderExpired), lateCall(ow.seq % 3)
}

// restock adds units to a SKU under id.
func (wk *worker) restock(ctx context.Context, id string) {
	r, ow := wk.r, wk.ow
	i := wk.pick()
	qty := restockFactor * r.w.QtyMax
	err := ow.resolve(ctx, func(ctx context.Context) error { return ow.ord.Restock(ctx, id, r.skus[i], qty) })
	switch Classify(err) {
	case KindOK:
		r.co.restocked[i].Add(qty)
	case KindOutcomeUnknown, KindOther, KindCanceled:
		ow.unsettled = append(ow.unsettled, restockCall{seq: ow.seq, sku: i, qty: qty})
	}
}
