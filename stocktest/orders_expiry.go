package stocktest

import (
	"time"

	"github.com/stockguard/stockguard"
)

// expiryMargin is how long past a hold's deadline, measured on the
// client's monotonic clock from when Hold returned, the cases wait before
// they require the hold to have expired. The backend set the deadline
// before Hold returned, so the wait alone suffices; the margin absorbs
// timer and clock granularity.
const expiryMargin = 100 * time.Millisecond

// sleepPast sleeps until expiryMargin after the deadline of a hold with
// ttl whose Hold returned at placed, or until the case's context ends.
func (o *orders) sleepPast(placed time.Time, ttl time.Duration) {
	t := time.NewTimer(time.Until(placed.Add(ttl + expiryMargin)))
	defer t.Stop()
	select {
	case <-t.C:
	case <-o.ctx.Done():
	}
}

// checkExpiry leaves holds to expire with nothing sweeping and checks that
// their units are back at once: Stock counts them, a buyer can take them,
// Order says expired, Confirm is ErrOrderClosed and Return gives nothing
// twice.
func checkExpiry(o *orders) {
	ttl := o.suite.HoldTTL
	skus, ok := o.stock("expiry", 5, 3, 4)
	if !ok {
		return
	}
	a, b, c := skus[0], skus[1], skus[2]
	// Two holds, so that a read of b and a take of a each meet an expired
	// hold no other request has reclaimed yet.
	first, second := o.subj.ID("expiry-a-c"), o.subj.ID("expiry-b")
	firstLines := []stockguard.Line{line(a, 5), line(c, 2)}
	before := time.Now()
	if !o.hold(o.a, first, ttl, nil, firstLines...) || !o.hold(o.a, second, ttl, nil, line(b, 1)) {
		return
	}
	placed := time.Now()
	// While the client's clock says the deadline cannot have passed, the
	// units are held. Later, either level is right.
	if level, err := o.b.Stock(o.ctx, a); o.r.expect("Stock during a hold", err, nil) && level != 0 && time.Since(before) < ttl {
		o.r.add("Stock(%q) = %d during a hold of all of it, want 0", a, level)
	}
	if info, err := o.b.Order(o.ctx, first); o.r.expect("Order during a hold", err, nil) && time.Since(before) < ttl {
		if info.State != stockguard.OrderHeld {
			o.r.add("Order(%q) before its deadline: state %v, want held", first, info.State)
		}
		o.deadline(info, ttl, before, placed)
	}

	o.sleepPast(placed, ttl)
	o.r.level(o.ctx, o.b, b, 3)
	o.take(o.b, o.subj.ID("expiry-buyer"), nil, line(a, 5))
	o.r.level(o.ctx, o.a, c, 4)
	if info, ok := o.order(first, stockguard.OrderExpired, firstLines...); ok {
		o.deadline(info, ttl, before, placed)
	}
	o.order(second, stockguard.OrderExpired, line(b, 1))

	o.confirm(o.a, first, stockguard.ErrOrderClosed)
	o.confirm(o.b, second, stockguard.ErrOrderClosed)
	o.hold(o.b, first, ttl, stockguard.ErrOrderClosed, firstLines...)
	o.giveBack(o.a, first, nil)
	o.giveBack(o.b, first, nil)
	o.giveBack(o.b, second, nil)
	for _, id := range []string{first, second} {
		if info, err := o.a.Order(o.ctx, id); o.r.expect("Order of an expired hold after Return", err, nil) && info.State.Open() {
			o.r.add("Order(%q) of an expired hold after Return: state %v", id, info.State)
		}
	}
	o.levels(map[string]int64{a: 0, b: 3, c: 4})
}

// checkSetStockAfterExpiry overwrites a SKU whose hold expired while
// nothing read it: the expired hold's units were back on the shelf, so
// the level set replaces them, and reclaiming the hold later must not add
// them again on top of it.
func checkSetStockAfterExpiry(o *orders) {
	ttl := o.suite.HoldTTL
	skus, ok := o.stock("setexpired", 10)
	if !ok {
		return
	}
	sku := skus[0]
	id := o.subj.ID("setexpired-hold")
	if !o.hold(o.a, id, ttl, nil, line(sku, 3)) {
		return
	}
	o.sleepPast(time.Now(), ttl)
	if !o.r.set(o.ctx, o.b, sku, 4) {
		return
	}
	o.r.level(o.ctx, o.a, sku, 4)
	o.order(id, stockguard.OrderExpired, line(sku, 3))
	o.giveBack(o.b, id, nil)
	o.r.level(o.ctx, o.b, sku, 4)
	o.take(o.a, o.subj.ID("setexpired-buyer"), nil, line(sku, 4))
	o.levels(map[string]int64{sku: 0})
}
