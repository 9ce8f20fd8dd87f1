package stocktest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/stockguard/stockguard"
	"github.com/stockguard/stockguard/internal/errtext"
	"github.com/stockguard/stockguard/strategy"
)

// OrdersSubject is what an order case checks.
type OrdersSubject struct {
	// New returns an instance of the Orders under test. Every instance works
	// on the same store, as two processes of one application would.
	New func() stockguard.Orders
	// SKU derives from base a SKU unique to this run.
	SKU func(base string) string
	// ID derives from base an order ID unique to this run, so that cases
	// sharing a server never see each other's orders.
	ID func(base string) string
}

// OrdersCase is one conformance check of an Orders. Check returns the
// violations it found.
type OrdersCase struct {
	Name  string
	Check func(ctx context.Context, s OrdersSubject) []Violation
}

// RunOrders runs the default Suite's order cases as subtests of t.
// newOrders is called for every instance a case needs; all instances it
// returns within one call of RunOrders must share one store. The order
// cases check what Orders adds to Inventory: run Run as well.
func RunOrders(t *testing.T, newOrders func(t *testing.T) stockguard.Orders) {
	t.Helper()
	Suite{}.RunOrders(t, newOrders)
}

// RunOrders runs every order case of s as a subtest of t, reporting each
// violation as a test error.
func (s Suite) RunOrders(t *testing.T, newOrders func(t *testing.T) stockguard.Orders) {
	t.Helper()
	for _, c := range s.OrdersCases() {
		t.Run(c.Name, func(t *testing.T) {
			subj := NewOrdersSubject(func() stockguard.Orders { return newOrders(t) })
			for _, v := range c.Check(t.Context(), subj) {
				t.Error(v)
			}
		})
	}
}

// CheckOrders runs every order case of s against newOrders and returns all
// violations; nil means the Orders conforms.
func (s Suite) CheckOrders(ctx context.Context, newOrders func() stockguard.Orders) []Violation {
	var all []Violation
	for _, c := range s.OrdersCases() {
		all = append(all, c.Check(ctx, NewOrdersSubject(newOrders))...)
	}
	return all
}

// NewOrdersSubject returns an OrdersSubject over newOrders with a fresh
// random tag for its SKUs and IDs.
func NewOrdersSubject(newOrders func() stockguard.Orders) OrdersSubject {
	var b [4]byte
	rand.Read(b[:])
	tag := hex.EncodeToString(b[:])
	return OrdersSubject{
		New: newOrders,
		SKU: func(base string) string { return uniqueSKU(base, tag) },
		ID:  func(base string) string { return base + "~" + tag },
	}
}

// OrdersCases returns the order cases of s.
func (s Suite) OrdersCases() []OrdersCase {
	s = s.withDefaults()
	cases := []OrdersCase{
		s.ordersCase("Take", checkTake),
		s.ordersCase("Hold", checkHold),
		s.ordersCase("Retry", checkRetry),
		s.ordersCase("RetrySoldOut", checkRetrySoldOut),
		s.ordersCase("Closed", checkClosed),
		s.ordersCase("Mismatch", checkMismatch),
		s.ordersCase("Confirm", checkConfirm),
		s.ordersCase("Return", checkReturn),
		s.ordersCase("UnknownOrder", checkUnknownOrder),
		s.ordersCase("Restock", checkRestock),
		s.ordersCase("MaxQty", checkMaxQty),
		s.ordersCase("Refused", checkRefused),
		s.ordersCase("AllOrNothing", checkAllOrNothing),
		s.ordersCase("UnknownSKU", checkOrdersUnknownSKU),
		s.ordersCase("InvalidInput", checkOrdersInvalidInput),
		s.ordersCase("NilContext", checkOrdersNilContext),
		s.ordersCase("CanceledContext", checkOrdersCanceled),
		s.ordersCase("Expiry", checkExpiry),
		s.ordersCase("ManyExpired", checkManyExpired),
		s.ordersCase("SetStockAfterExpiry", checkSetStockAfterExpiry),
		s.ordersCase("Concurrent", checkConcurrentOrders),
		s.ordersCase("Linearizable/OneOrder", checkOrderLinearizable),
	}
	return cases
}

// orders is what an order case works with: two instances over one store,
// the subject's names, the suite's settings, and the recorder.
type orders struct {
	ctx   context.Context
	r     *recorder
	a, b  stockguard.Orders
	subj  OrdersSubject
	suite Suite
}

// ordersCase makes an OrdersCase bounded by s.Timeout whose check reports
// through a recorder carrying the case's name.
func (s Suite) ordersCase(name string, check func(o *orders)) OrdersCase {
	return OrdersCase{Name: name, Check: func(ctx context.Context, subj OrdersSubject) []Violation {
		ctx, cancel := context.WithTimeout(ctx, s.Timeout)
		defer cancel()
		o := &orders{ctx: ctx, r: &recorder{name: name}, a: subj.New(), b: subj.New(), subj: subj, suite: s}
		check(o)
		if ctx.Err() != nil {
			o.r.add("did not finish within %v", s.Timeout)
		}
		return o.r.vs
	}}
}

// line is a Line literal that fits on one line.
func line(sku string, qty int64) stockguard.Line { return stockguard.Line{SKU: sku, Qty: qty} }

// stock creates one SKU per level, named from base, and reports whether
// all were set.
func (o *orders) stock(base string, levels ...int64) ([]string, bool) {
	skus := make([]string, len(levels))
	for i, level := range levels {
		skus[i] = o.subj.SKU(fmt.Sprintf("%s-%d", base, i))
		if !o.r.set(o.ctx, o.a, skus[i], level) {
			return nil, false
		}
	}
	return skus, true
}

// levels records a violation for every SKU whose stock, read through both
// instances, is not want's.
func (o *orders) levels(want map[string]int64) {
	for _, sku := range slices.Sorted(maps.Keys(want)) {
		o.r.level(o.ctx, o.a, sku, want[sku])
		o.r.level(o.ctx, o.b, sku, want[sku])
	}
}

func (o *orders) take(inst stockguard.Orders, id string, want error, lines ...stockguard.Line) bool {
	return o.r.expect(fmt.Sprintf("Take(%q, %v)", id, lines), inst.Take(o.ctx, id, lines...), want)
}

func (o *orders) hold(inst stockguard.Orders, id string, ttl time.Duration, want error, lines ...stockguard.Line) bool {
	return o.r.expect(fmt.Sprintf("Hold(%q, %v, %v)", id, ttl, lines), inst.Hold(o.ctx, id, ttl, lines...), want)
}

func (o *orders) confirm(inst stockguard.Orders, id string, want error) bool {
	return o.r.expect(fmt.Sprintf("Confirm(%q)", id), inst.Confirm(o.ctx, id), want)
}

func (o *orders) giveBack(inst stockguard.Orders, id string, want error) bool {
	return o.r.expect(fmt.Sprintf("Return(%q)", id), inst.Return(o.ctx, id), want)
}

func (o *orders) restock(inst stockguard.Orders, id, sku string, qty int64, want error) bool {
	return o.r.expect(fmt.Sprintf("Restock(%q, %q, %d)", id, sku, qty), inst.Restock(o.ctx, id, sku, qty), want)
}

// closed records a violation unless Confirm(id) of a returned order is
// ErrOrderClosed, in the words of errtext.Closed.
func (o *orders) closed(inst stockguard.Orders, id string) {
	op := fmt.Sprintf("Confirm(%q) of a returned order", id)
	if err := inst.Confirm(o.ctx, id); o.r.expect(op, err, stockguard.ErrOrderClosed) {
		o.r.text(op, err, errtext.Closed(id, stockguard.OrderReturned))
	}
}

// unknown records a violation unless Order(id) is ErrUnknownOrder, in the
// words of errtext.UnknownOrder.
func (o *orders) unknown(id string) {
	_, err := o.b.Order(o.ctx, id)
	op := fmt.Sprintf("Order(%q) of an order never applied", id)
	if o.r.expect(op, err, stockguard.ErrUnknownOrder) {
		o.r.text(op, err, errtext.UnknownOrder(id))
	}
}

// order records a violation unless Order(id), read through both instances,
// reports state and lines (in SKU order), and returns what b reported.
func (o *orders) order(id string, state stockguard.OrderState, lines ...stockguard.Line) (stockguard.OrderInfo, bool) {
	want := strategy.SortedLines(lines)
	var info stockguard.OrderInfo
	ok := true
	for _, inst := range []stockguard.Orders{o.a, o.b} {
		got, err := inst.Order(o.ctx, id)
		op := fmt.Sprintf("Order(%q)", id)
		if !o.r.expect(op, err, nil) {
			ok = false
			continue
		}
		if got.ID != id {
			o.r.add("%s: ID %q", op, got.ID)
			ok = false
		}
		if got.State != state {
			o.r.add("%s: state %v, want %v", op, got.State, state)
			ok = false
		}
		if !slices.Equal(got.Lines, want) {
			o.r.add("%s: lines %v, want %v (in SKU order)", op, got.Lines, want)
			ok = false
		}
		// A deadline is a hold's until it is confirmed: a taken order,
		// a confirmed hold included, expires no more.
		if got.State == stockguard.OrderTaken && !got.Deadline.IsZero() {
			o.r.add("%s: taken, yet reports deadline %v", op, got.Deadline)
			ok = false
		}
		info = got
	}
	return info, ok
}

// deadline records a violation unless a hold placed between before and
// after with ttl has its deadline at before+ttl…after+ttl, give or take
// the suite's ClockSkew between the backend's clock and the client's.
func (o *orders) deadline(info stockguard.OrderInfo, ttl time.Duration, before, after time.Time) {
	skew := o.suite.ClockSkew
	lo, hi := before.Add(ttl-skew), after.Add(ttl+skew)
	if info.Deadline.Before(lo) || info.Deadline.After(hi) {
		o.r.add("Order(%q): deadline %v, want %v…%v (placed at %v with ttl %v, clock skew %v allowed)",
			info.ID, info.Deadline, lo, hi, before, ttl, skew)
	}
}
