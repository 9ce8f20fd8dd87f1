package mysqllock

import (
	"context"
	"database/sql"
	"maps"

	"github.com/jmoiron/sqlx"
	"github.com/stockguard/stockguard"
)

// screen lets an optimistic batch refuse its orders on SKUs a batch
// lately refused an order on (see shortSKUs) without going the locking
// way: a plain read of those SKUs' rows — with whether they have expired
// holds, as explain reads them — decides, in arrival order, the orders on
// them. One that does not fit by the read is refused there, as Atomic
// explains a refusal: the SKU had no row, or too few units at the moment
// of the read, while the call was in flight. Its answer stands (final) once
// a locking read of its ID finds it unrecorded — unless it was refused only
// for the units of a batch-mate before it, then the write that places the
// batch-mate answers it — and the rest of the batch goes on
// optimistically. It reports false when
// the batch must go the locking way instead: a short SKU has expired holds
// (they come back first, under the rows' locks), or a refused order's ID
// is recorded already (answered from its record there). An error ends the
// batch's attempt.
func (b *Batched) screen(ctx context.Context, conn *sqlx.Conn, calls []orderCall) (bool, error) {
	var skus []any
	screened := map[string]bool{}
	for _, c := range calls {
		if c.op != opPlace {
			continue
		}
		for _, ln := range c.order.lines {
			if !screened[ln.SKU] && b.short.any([]stockguard.Line{ln}) {
				screened[ln.SKU] = true
				skus = append(skus, ln.SKU)
			}
		}
	}
	if len(skus) == 0 {
		return true, nil
	}
	type level struct {
		qty     int64
		expired bool
	}
	read := make(map[string]level, len(skus))
	err := eachRow(ctx, conn, "SELECT sku, qty, EXISTS(SELECT 1 FROM "+b.lq.lines+" l WHERE l.sku = s.sku AND l.expires <= "+now+") FROM "+
		b.lq.stock+" s WHERE sku IN ("+list(len(skus))+")", skus, func(rows *sql.Rows) error {
		var sku string
		var lv level
		err := rows.Scan(&sku, &lv.qty, &lv.expired)
		read[sku] = lv
		return err
	})
	if err != nil {
		return false, err
	}
	have := maps.Clone(read)
	lockingWay := func() (bool, error) {
		for i := range calls {
			calls[i].final, calls[i].answer, calls[i].refused = false, nil, false
		}
		return false, nil
	}
	var refused []any
	for i := range calls {
		c := &calls[i]
		if c.op != opPlace {
			continue
		}
		sku, answer, fits := "", error(nil), true
		for _, ln := range c.order.lines {
			if !screened[ln.SKU] {
				continue // the optimistic UPDATE checks it
			}
			switch lv, ok := have[ln.SKU]; {
			case !ok:
				sku, answer = ln.SKU, unknownSKU(ln.SKU)
			case lv.qty < ln.Qty && lv.expired:
				return lockingWay()
			case lv.qty < ln.Qty:
				sku, answer = ln.SKU, insufficient(ln.SKU, ln.Qty, lv.qty)
			default:
				continue
			}
			fits = false
			break
		}
		if !fits {
			c.refused, c.answer = true, answer
			b.short.mark(sku)
			refused = append(refused, c.order.id)
			continue
		}
		for _, ln := range c.order.lines {
			if lv, ok := have[ln.SKU]; ok {
				lv.qty -= ln.Qty
				have[ln.SKU] = lv
			}
		}
	}
	if len(refused) == 0 {
		return true, nil
	}
	// A locking read: an attempt with the same ID that has recorded it
	// but not yet committed — abandoned by its caller, running on — is
	// waited for, and found if it commits. A plain read would miss it and
	// refuse an order that is about to be taken.
	var found []string
	if err := sel(ctx, conn, &found, "SELECT id FROM "+b.lq.orders+" WHERE id IN ("+list(len(refused))+") FOR UPDATE", refused...); err != nil {
		return false, classify(ctx, err, unsent)
	}
	if len(found) > 0 {
		return lockingWay()
	}
	// A refusal stands only when the call does not fit the levels as read
	// (see orderCall.refused); one refused for a batch-mate placed before
	// it is answered by the write that places the batch-mate.
	fitsRead := func(lines []stockguard.Line) bool {
		for _, ln := range lines {
			if lv, ok := read[ln.SKU]; screened[ln.SKU] && (!ok || lv.qty < ln.Qty) {
				return false
			}
		}
		return true
	}
	for i := range calls {
		if c := &calls[i]; c.refused && !fitsRead(c.order.lines) {
			c.final = true
		}
	}
	return true, nil
}
