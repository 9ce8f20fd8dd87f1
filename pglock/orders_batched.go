package pglock

import (
	"cmp"
	"context"
	"errors"
	"slices"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/stockguard/stockguard"
	"github.com/stockguard/stockguard/strategy"
)

// Take takes every line, or none, for good under id. An order of one line
// joins the batch of its SKU, like a Decrement; an order of several lines
// joins a batch of such orders, whatever their SKUs, written in one
// transaction. It returns as Atomic.Take does; an order the batch refuses
// is answered ErrInsufficientStock or ErrUnknownSKU and recorded nowhere,
// even if the batch's COMMIT fails.
func (b *Batched) Take(ctx context.Context, id string, lines ...stockguard.Line) error {
	if err := b.check(ctx, strategy.ValidateTake(id, lines)); err != nil {
		return err
	}
	return b.order(ctx, newOrder{id: id, kind: kindTake, lines: strategy.SortedLines(lines)})
}

// Hold takes every line, or none, under id until Confirm, Return, or ttl
// has passed by the server's clock; it batches as Take does.
func (b *Batched) Hold(ctx context.Context, id string, ttl time.Duration, lines ...stockguard.Line) error {
	if err := b.check(ctx, strategy.ValidateHold(id, ttl, lines)); err != nil {
		return err
	}
	return b.order(ctx, newOrder{id: id, kind: kindHold, ttl: ttl, lines: strategy.SortedLines(lines)})
}

func (b *Batched) order(ctx context.Context, o newOrder) error {
	if len(o.lines) > 1 {
		return b.orders.Do(ctx, orderQueue, request{order: &o})
	}
	return b.writes.Do(ctx, o.lines[0].SKU, request{qty: o.lines[0].Qty, order: &o})
}

// applyOrders writes a batch that carries orders: one transaction records
// them (one multi-row INSERT for the orders, one for their lines, IDs in
// order so that two batches never deadlock on them) and takes the total
// with the conditional UPDATE, or grants the members that fit under the
// row lock and deletes the records of those it refuses. An ID recorded
// already fails the INSERT (errDuplicate): the transaction rolls back,
// those members are answered from their records, and the batch is tried
// again without them — so a duplicate never takes twice.
func (b *Batched) applyOrders(ctx context.Context, conn *sqlx.Conn, sku string, members []*request, total int64, seal func() bool) error {
	orders := make([]newOrder, 0, len(members))
	for _, r := range members {
		if r.order != nil {
			orders = append(orders, *r.order)
		}
	}
	slices.SortFunc(orders, func(x, y newOrder) int { return cmp.Compare(x.id, y.id) })
	err := b.withReclaim(ctx, conn, one(sku), func(mayReclaim bool) error {
		return inTx(ctx, conn, nil, func(tx *sqlx.Tx) error {
			if err := b.fenced(ctx, tx); err != nil {
				return err
			}
			if err := b.record(ctx, tx, orders); err != nil {
				return err
			}
			if !seal() { // see sendWith
				return errLeft
			}
			if total <= stockguard.MaxQty {
				// The orders' units go onto on_orders; the Decrements' are
				// gone for good.
				res, err := tx.ExecContext(ctx, b.lq.takeBatch, total, sku, onOrders(members))
				if err != nil {
					return classify(ctx, err, unsent)
				}
				if n, err := res.RowsAffected(); err != nil || n == 1 {
					return classify(ctx, err, unsent)
				}
			}
			return b.grant(ctx, tx, sku, members, mayReclaim)
		})
	})
	if errors.Is(err, errDuplicate) {
		return b.settleRecorded(ctx, conn, members)
	}
	return err
}

// onOrders is the units of the members that carry orders.
func onOrders(members []*request) int64 {
	var n int64
	for _, r := range members {
		if r.order != nil {
			n += r.qty
		}
	}
	return n
}

// settleRecorded answers the members whose ID is recorded from their
// records, for good, and has the batch tried again without them.
func (b *Batched) settleRecorded(ctx context.Context, conn *sqlx.Conn, members []*request) error {
	for _, r := range members {
		if r.order == nil {
			continue
		}
		rec, ok, err := b.read(ctx, conn, r.order.id)
		if err != nil {
			return err
		}
		if ok {
			r.settled, r.answer = true, resolve(r.order.id, rec, r.order.kind, r.order.lines)
		}
	}
	return strategy.Retry(errDuplicate)
}

// unrecord deletes, in tx, the records of the refused members that carry
// orders: a refused order is recorded nowhere.
func (b *Batched) unrecord(ctx context.Context, tx *sqlx.Tx, refused []*request) error {
	var ids []string
	for _, r := range refused {
		if r.order != nil {
			ids = append(ids, r.order.id)
		}
	}
	if len(ids) == 0 {
		return nil
	}
	if _, err := tx.ExecContext(ctx, "DELETE FROM "+b.lq.lines+" WHERE order_id = ANY($1)", ids); err != nil {
		return classify(ctx, err, unsent)
	}
	_, err := tx.ExecContext(ctx, "DELETE FROM "+b.lq.orders+" WHERE id = ANY($1)", ids)
	return classify(ctx, err, unsent)
}
