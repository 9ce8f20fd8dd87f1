package stocktest

import (
	"github.com/stockguard/stockguard"
)

// checkMaxQty: units out on open orders count against stockguard.MaxQty.
// A Restock or a SetStock that would leave no room for them to come back
// is refused with ErrInvalidRequest and changes nothing, so that a Return
// is never refused and Stock never reads a level past MaxQty: the SKU
// stays usable.
func checkMaxQty(o *orders) {
	const taken, held = 10, 5
	skus, ok := o.stock("max-qty", stockguard.MaxQty)
	if !ok {
		return
	}
	sku := skus[0]
	take, hold := o.subj.ID("max-qty-take"), o.subj.ID("max-qty-hold")
	if !o.take(o.a, take, nil, line(sku, taken)) || !o.hold(o.b, hold, longTTL, nil, line(sku, held)) {
		return
	}
	level := int64(stockguard.MaxQty - taken - held)
	o.levels(map[string]int64{sku: level})

	// Every unit below MaxQty is spoken for by the two open orders.
	refused := o.subj.ID("max-qty-restock")
	if o.restock(o.a, refused, sku, 1, stockguard.ErrInvalidRequest) {
		o.unknown(refused)
	}
	o.r.expect("SetStock to MaxQty with units out on orders", o.b.SetStock(o.ctx, sku, stockguard.MaxQty), stockguard.ErrInvalidRequest)
	o.levels(map[string]int64{sku: level})

	// Both come back, to exactly MaxQty; then nothing more fits.
	o.giveBack(o.a, take, nil)
	o.giveBack(o.b, hold, nil)
	o.levels(map[string]int64{sku: stockguard.MaxQty})
	o.restock(o.b, refused, sku, 1, stockguard.ErrInvalidRequest)
	o.levels(map[string]int64{sku: stockguard.MaxQty})

	// With the orders closed, the whole range is the SKU's again.
	if o.r.set(o.ctx, o.a, sku, stockguard.MaxQty-1) && o.restock(o.a, refused, sku, 1, nil) {
		o.levels(map[string]int64{sku: stockguard.MaxQty})
	}
}
