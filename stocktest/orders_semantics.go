package stocktest

import (
	"fmt"
	"time"

	"github.com/stockguard/stockguard"
)

// longTTL is the ttl of holds that must not expire while a case runs. It is
// an odd value so that a deadline computed from another ttl shows.
const longTTL = 47 * time.Minute

// The cases in this file follow the rules of stockguard.Orders, one case
// per rule.
// Each writes through one instance and reads through both.

// checkTake: a fresh Take takes every line for good.
func checkTake(o *orders) {
	skus, ok := o.stock("take", 10, 10, 10)
	if !ok {
		return
	}
	id := o.subj.ID("take")
	// Out of SKU order: Order must list them sorted.
	lines := []stockguard.Line{line(skus[2], 3), line(skus[0], 1), line(skus[1], 10)}
	if o.take(o.a, id, nil, lines...) {
		if info, ok := o.order(id, stockguard.OrderTaken, lines...); ok && !info.Deadline.IsZero() {
			o.r.add("Order(%q) of a Take has deadline %v; only holds have one", id, info.Deadline)
		}
	}
	o.levels(map[string]int64{skus[0]: 9, skus[1]: 0, skus[2]: 7})
}

// checkHold: a fresh Hold takes every line until its deadline, which is
// about now+ttl.
func checkHold(o *orders) {
	skus, ok := o.stock("hold", 5, 5)
	if !ok {
		return
	}
	id := o.subj.ID("hold")
	lines := []stockguard.Line{line(skus[1], 2), line(skus[0], 5)}
	before := time.Now()
	if o.hold(o.a, id, longTTL, nil, lines...) {
		after := time.Now()
		if info, ok := o.order(id, stockguard.OrderHeld, lines...); ok {
			o.deadline(info, longTTL, before, after)
		}
	}
	o.levels(map[string]int64{skus[0]: 0, skus[1]: 3})
	// Held units are gone for other buyers.
	other := o.subj.ID("hold-other")
	o.take(o.b, other, stockguard.ErrInsufficientStock, line(skus[0], 1))
	o.unknown(other)
}

// checkRetry: Take or Hold again with the same lines, in any order and
// through any instance, of an order held or taken is nil and takes nothing
// twice.
func checkRetry(o *orders) {
	skus, ok := o.stock("retry", 10, 10)
	if !ok {
		return
	}
	a, b := skus[0], skus[1]
	take := o.subj.ID("retry-take")
	if o.take(o.a, take, nil, line(a, 2), line(b, 1)) {
		o.take(o.a, take, nil, line(a, 2), line(b, 1))
		o.take(o.b, take, nil, line(b, 1), line(a, 2))
		o.order(take, stockguard.OrderTaken, line(a, 2), line(b, 1))
	}
	o.levels(map[string]int64{a: 8, b: 9})

	hold := o.subj.ID("retry-hold")
	if o.hold(o.a, hold, longTTL, nil, line(a, 3)) {
		o.hold(o.b, hold, longTTL, nil, line(a, 3))
		o.order(hold, stockguard.OrderHeld, line(a, 3))
		o.levels(map[string]int64{a: 5, b: 9})
		// A confirmed hold is taken: a retry of the Hold is still nil.
		if o.confirm(o.a, hold, nil) {
			o.hold(o.b, hold, longTTL, nil, line(a, 3))
			o.order(hold, stockguard.OrderTaken, line(a, 3))
		}
	}
	o.levels(map[string]int64{a: 5, b: 9})
}

// checkRetrySoldOut: the answers of checkRetry, checkClosed and
// checkMismatch come from the order's record also once its SKU is sold
// out: a retry of an order held or taken is nil, not ErrInsufficientStock
// (a path that tries the stock before the ID must still read the record),
// and nothing changes.
func checkRetrySoldOut(o *orders) {
	skus, ok := o.stock("retry-soldout", 3, 2, 2)
	if !ok {
		return
	}
	a, b, c := skus[0], skus[1], skus[2]
	take, hold := o.subj.ID("retry-soldout-take"), o.subj.ID("retry-soldout-hold")
	closed, drain := o.subj.ID("retry-soldout-closed"), o.subj.ID("retry-soldout-drain")
	if o.take(o.a, take, nil, line(a, 3)) {
		o.take(o.a, take, nil, line(a, 3))
		o.take(o.b, take, nil, line(a, 3))
		o.take(o.b, take, stockguard.ErrOrderMismatch, line(a, 2))
		o.hold(o.a, take, longTTL, stockguard.ErrOrderMismatch, line(a, 3))
		o.order(take, stockguard.OrderTaken, line(a, 3))
	}
	if o.hold(o.a, hold, longTTL, nil, line(b, 2)) {
		o.hold(o.b, hold, longTTL, nil, line(b, 2))
		o.take(o.a, hold, stockguard.ErrOrderMismatch, line(b, 2))
		o.order(hold, stockguard.OrderHeld, line(b, 2))
	}
	if o.take(o.a, closed, nil, line(c, 2)) && o.giveBack(o.a, closed, nil) && o.take(o.b, drain, nil, line(c, 2)) {
		o.take(o.a, closed, stockguard.ErrOrderClosed, line(c, 2))
		o.take(o.b, closed, stockguard.ErrOrderClosed, line(c, 2))
		o.order(closed, stockguard.OrderReturned, line(c, 2))
	}
	o.levels(map[string]int64{a: 0, b: 0, c: 0})
}

// checkClosed: Take or Hold again, or Confirm, of a returned order is
// ErrOrderClosed and changes nothing.
func checkClosed(o *orders) {
	skus, ok := o.stock("closed", 10, 10)
	if !ok {
		return
	}
	a, b := skus[0], skus[1]
	take := o.subj.ID("closed-take")
	if o.take(o.a, take, nil, line(a, 2)) && o.giveBack(o.a, take, nil) {
		o.take(o.a, take, stockguard.ErrOrderClosed, line(a, 2))
		o.take(o.b, take, stockguard.ErrOrderClosed, line(a, 2))
		o.closed(o.b, take)
		o.order(take, stockguard.OrderReturned, line(a, 2))
	}
	o.levels(map[string]int64{a: 10, b: 10})

	hold := o.subj.ID("closed-hold")
	if o.hold(o.a, hold, longTTL, nil, line(a, 1), line(b, 1)) && o.giveBack(o.b, hold, nil) {
		o.hold(o.a, hold, longTTL, stockguard.ErrOrderClosed, line(b, 1), line(a, 1))
		o.closed(o.a, hold)
		o.order(hold, stockguard.OrderReturned, line(a, 1), line(b, 1))
	}
	o.levels(map[string]int64{a: 10, b: 10})
}

// checkMismatch: Take, Hold or Restock under an ID applied with other
// lines or as the other call is ErrOrderMismatch and changes nothing.
func checkMismatch(o *orders) {
	skus, ok := o.stock("mismatch", 10, 10, 10)
	if !ok {
		return
	}
	a, b, c := skus[0], skus[1], skus[2]
	mismatch := stockguard.ErrOrderMismatch

	take := o.subj.ID("mismatch-take")
	if o.take(o.a, take, nil, line(a, 2), line(b, 2)) {
		o.take(o.b, take, mismatch, line(a, 2))                         // fewer lines
		o.take(o.b, take, mismatch, line(a, 2), line(b, 2), line(c, 1)) // more lines
		o.take(o.b, take, mismatch, line(a, 3), line(b, 2))             // another qty
		o.take(o.b, take, mismatch, line(a, 2), line(c, 2))             // another SKU
		o.hold(o.b, take, longTTL, mismatch, line(a, 2), line(b, 2))    // the other call
		o.restock(o.b, take, a, 2, mismatch)
		o.order(take, stockguard.OrderTaken, line(a, 2), line(b, 2))
	}

	hold := o.subj.ID("mismatch-hold")
	if o.hold(o.a, hold, longTTL, nil, line(c, 1)) {
		o.take(o.b, hold, mismatch, line(c, 1))
		o.hold(o.b, hold, longTTL, mismatch, line(c, 2))
		o.restock(o.b, hold, c, 1, mismatch)
		o.order(hold, stockguard.OrderHeld, line(c, 1))
	}

	restock := o.subj.ID("mismatch-restock")
	if o.restock(o.a, restock, a, 5, nil) {
		o.restock(o.b, restock, a, 6, mismatch)
		o.restock(o.b, restock, b, 5, mismatch)
		o.take(o.b, restock, mismatch, line(a, 5))
		o.hold(o.b, restock, longTTL, mismatch, line(a, 5))
	}
	o.levels(map[string]int64{a: 13, b: 8, c: 9})
}

// checkConfirm: Confirm of a hold before its deadline makes it taken; of an
// order taken it is nil. Neither moves stock.
func checkConfirm(o *orders) {
	skus, ok := o.stock("confirm", 10, 10)
	if !ok {
		return
	}
	a, b := skus[0], skus[1]
	hold := o.subj.ID("confirm-hold")
	if o.hold(o.a, hold, longTTL, nil, line(a, 3), line(b, 1)) && o.confirm(o.b, hold, nil) {
		o.order(hold, stockguard.OrderTaken, line(a, 3), line(b, 1))
		o.confirm(o.a, hold, nil)
	}
	take := o.subj.ID("confirm-take")
	if o.take(o.a, take, nil, line(a, 1)) {
		o.confirm(o.b, take, nil)
		o.order(take, stockguard.OrderTaken, line(a, 1))
	}
	o.levels(map[string]int64{a: 6, b: 9})
}

// checkReturn: Return gives the units of an order held, taken or confirmed
// back exactly once; a second Return is nil and gives nothing.
func checkReturn(o *orders) {
	skus, ok := o.stock("return", 10, 10)
	if !ok {
		return
	}
	a, b := skus[0], skus[1]
	all := map[string]int64{a: 10, b: 10}

	take := o.subj.ID("return-take")
	if o.take(o.a, take, nil, line(a, 4), line(b, 1)) {
		o.levels(map[string]int64{a: 6, b: 9})
		if o.giveBack(o.a, take, nil) {
			o.levels(all)
			o.giveBack(o.b, take, nil)
			o.order(take, stockguard.OrderReturned, line(a, 4), line(b, 1))
		}
	}
	o.levels(all)

	hold := o.subj.ID("return-hold")
	if o.hold(o.a, hold, longTTL, nil, line(a, 3)) && o.giveBack(o.b, hold, nil) {
		o.levels(all)
		o.giveBack(o.a, hold, nil)
		o.order(hold, stockguard.OrderReturned, line(a, 3))
	}
	o.levels(all)

	confirmed := o.subj.ID("return-confirmed")
	if o.hold(o.a, confirmed, longTTL, nil, line(b, 2)) && o.confirm(o.a, confirmed, nil) && o.giveBack(o.b, confirmed, nil) {
		o.levels(all)
		o.giveBack(o.a, confirmed, nil)
		o.order(confirmed, stockguard.OrderReturned, line(b, 2))
	}
	o.levels(all)
}

// checkUnknownOrder: Confirm, Return and Order of an ID never applied are
// ErrUnknownOrder and create nothing.
func checkUnknownOrder(o *orders) {
	id := o.subj.ID("never-applied")
	o.suite.unchanged(o.ctx, o.r, "Confirm, Return and Order of an unknown order", func() {
		o.confirm(o.a, id, stockguard.ErrUnknownOrder)
		o.giveBack(o.a, id, stockguard.ErrUnknownOrder)
		o.unknown(id)
	})
	o.confirm(o.b, id, stockguard.ErrUnknownOrder)
}

// checkRestock: Restock adds its units to a stocked SKU once per ID; to a
// SKU never stocked it is ErrUnknownSKU and records nothing.
func checkRestock(o *orders) {
	skus, ok := o.stock("restock", 5)
	if !ok {
		return
	}
	a := skus[0]
	id := o.subj.ID("restock")
	if o.restock(o.a, id, a, 3, nil) {
		o.levels(map[string]int64{a: 8})
		o.restock(o.b, id, a, 3, nil)
		o.restock(o.a, id, a, 3, nil)
	}
	o.levels(map[string]int64{a: 8})

	never := o.subj.SKU("restock-never-stocked")
	fresh := o.subj.ID("restock-unknown-sku")
	o.suite.unchanged(o.ctx, o.r, "Restock of a never-stocked SKU", func() {
		o.restock(o.a, fresh, never, 3, stockguard.ErrUnknownSKU)
		_, err := o.b.Stock(o.ctx, never)
		o.r.expect("Stock of a never-stocked SKU after Restock", err, stockguard.ErrUnknownSKU)
		o.unknown(fresh)
	})
	// Nothing was recorded under fresh, so it is free for another restock.
	o.restock(o.b, fresh, a, 2, nil)
	o.levels(map[string]int64{a: 10})
}

// checkRefused: a Take or Hold refused for want of stock records nothing,
// and a later call with that ID, with the same lines or others, tries
// afresh.
func checkRefused(o *orders) {
	skus, ok := o.stock("refused", 5, 1, 4)
	if !ok {
		return
	}
	a, b, c := skus[0], skus[1], skus[2]

	take := o.subj.ID("refused-take")
	if o.take(o.a, take, stockguard.ErrInsufficientStock, line(a, 2), line(b, 2)) {
		o.unknown(take)
		o.confirm(o.b, take, stockguard.ErrUnknownOrder)
		o.giveBack(o.b, take, stockguard.ErrUnknownOrder)
		o.levels(map[string]int64{a: 5, b: 1})
		if o.r.set(o.ctx, o.a, b, 2) && o.take(o.b, take, nil, line(a, 2), line(b, 2)) {
			o.order(take, stockguard.OrderTaken, line(a, 2), line(b, 2))
		}
	}
	o.levels(map[string]int64{a: 3, b: 0})

	hold := o.subj.ID("refused-hold")
	if o.hold(o.a, hold, longTTL, stockguard.ErrInsufficientStock, line(a, 3), line(b, 1)) {
		o.unknown(hold)
		if o.restock(o.a, o.subj.ID("refused-restock"), b, 1, nil) && o.hold(o.b, hold, longTTL, nil, line(a, 3), line(b, 1)) {
			o.order(hold, stockguard.OrderHeld, line(a, 3), line(b, 1))
		}
	}
	o.levels(map[string]int64{a: 0, b: 0})

	// Refused, then applied with other lines: nothing to mismatch.
	other := o.subj.ID("refused-other-lines")
	if o.take(o.a, other, stockguard.ErrInsufficientStock, line(c, 5)) && o.take(o.b, other, nil, line(c, 4)) {
		o.order(other, stockguard.OrderTaken, line(c, 4))
	}
	o.levels(map[string]int64{c: 0})
}

// checkAllOrNothing: a multi-line order with one short line, first, in the
// middle or last in SKU order, takes nothing from the others.
func checkAllOrNothing(o *orders) {
	skus, ok := o.stock("all-or-nothing", 10, 10, 10, 10, 10)
	if !ok {
		return
	}
	all := map[string]int64{}
	for _, sku := range skus {
		all[sku] = 10
	}
	for _, short := range []int{0, 2, 4} {
		if !o.r.set(o.ctx, o.a, skus[short], 1) {
			return
		}
		all[skus[short]] = 1
		// In reverse SKU order, so that an implementation that stops at
		// the first short line in the order given would have taken some.
		var lines []stockguard.Line
		for i := len(skus) - 1; i >= 0; i-- {
			lines = append(lines, line(skus[i], 2))
		}
		take, hold := o.subj.ID(fmt.Sprintf("aon-take-%d", short)), o.subj.ID(fmt.Sprintf("aon-hold-%d", short))
		o.take(o.a, take, stockguard.ErrInsufficientStock, lines...)
		o.hold(o.b, hold, longTTL, stockguard.ErrInsufficientStock, lines...)
		o.unknown(take)
		o.unknown(hold)
		o.levels(all)
		if !o.r.set(o.ctx, o.a, skus[short], 10) {
			return
		}
		all[skus[short]] = 10
	}
}

// checkOrdersUnknownSKU: an order with a line of a SKU never stocked,
// first or last in SKU order, is ErrUnknownSKU, takes nothing, records
// nothing and creates nothing.
func checkOrdersUnknownSKU(o *orders) {
	skus, ok := o.stock("unknown-sku", 10, 10)
	if !ok {
		return
	}
	a, b := skus[0], skus[1]
	// "/" sorts before the digits of the stocked SKUs, "~" after them.
	first, last := o.subj.SKU("unknown-sku-/"), o.subj.SKU("unknown-sku-~")
	ids := []string{o.subj.ID("unknown-sku-take"), o.subj.ID("unknown-sku-hold"), o.subj.ID("unknown-sku-restock")}
	o.suite.unchanged(o.ctx, o.r, "Take, Hold and Restock of never-stocked SKUs", func() {
		o.take(o.a, ids[0], stockguard.ErrUnknownSKU, line(a, 1), line(first, 1), line(b, 1))
		o.hold(o.b, ids[1], longTTL, stockguard.ErrUnknownSKU, line(a, 1), line(b, 1), line(last, 1))
		o.restock(o.a, ids[2], last, 1, stockguard.ErrUnknownSKU)
		for _, sku := range []string{first, last} {
			_, err := o.b.Stock(o.ctx, sku)
			o.r.expect("Stock of a never-stocked SKU after orders of it", err, stockguard.ErrUnknownSKU)
		}
		for _, id := range ids {
			o.unknown(id)
		}
	})
	o.levels(map[string]int64{a: 10, b: 10})
	// Nothing recorded: the IDs are free.
	o.take(o.b, ids[0], nil, line(a, 1))
	o.hold(o.a, ids[1], longTTL, nil, line(b, 1))
	o.levels(map[string]int64{a: 9, b: 9})
}
