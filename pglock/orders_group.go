package pglock

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"maps"
	"slices"

	"github.com/jmoiron/sqlx"
	"github.com/stockguard/stockguard"
	"github.com/stockguard/stockguard/internal/combine"
)

// Group commit of orders of several lines (NewBatched's Take and Hold).
//
// Every such order of an instance joins one queue, whatever its SKUs, and
// a batch of them — carts from many buyers — is one transaction:
//
//	BEGIN
//	INSERT INTO orders …; INSERT INTO order_lines …   -- one statement, every order, IDs in order
//	SELECT sku, qty FROM stock WHERE sku = ANY(…) ORDER BY sku FOR UPDATE
//	-- decide each order in arrival order, in memory
//	DELETE FROM order_lines …; DELETE FROM orders …  -- only for refused orders
//	UPDATE stock … FROM unnest(skus, qtys)         -- the granted units, per SKU
//	COMMIT
//
// The lines of the batch are aggregated per SKU and each SKU row is locked
// once, in SKU order, after the order rows, as every transaction of the
// package locks: two batches, of this instance or another, never deadlock.
// Each order is decided in arrival order against the levels read under
// those locks: an order whose lines all fit is granted and its units leave
// the running level; one that does not is refused on its own, its record
// deleted in the same transaction, and leaves its batch-mates alone. Nothing
// waits to fill a batch: an order that finds the queue idle goes out
// alone, and batches grow only while a transaction is in flight — one
// fsync per batch, however many orders it carries.
//
// Exactly once: two orders with one ID never share a batch (the later one
// waits for the next), and an ID recorded already fails the batch's INSERT:
// the transaction rolls back, the orders whose IDs are recorded are
// answered from their records, and the batch is tried again without them.
//
// Expired holds: when an order of the batch is short on a SKU with
// expired holds, the batch rolls back, reclaims the holds of its short
// SKUs in a transaction of its own (see ledger.reclaimIn) and is tried
// again; a batch with no short order never looks for them.

// orderQueue is the combiner key of the orders' one queue.
const orderQueue = "orders"

// sendOrders writes bt's members, orders of several lines; see sendWith.
func (b *Batched) sendOrders(ctx context.Context, _ string, bt *combine.Batch[request]) error {
	return b.sendWith(ctx, bt, b.applyGroup)
}

// applyGroup records members' orders, grants those that fit and refuses
// the others, in one transaction.
func (b *Batched) applyGroup(ctx context.Context, conn *sqlx.Conn, members []*request, seal func() bool) error {
	orders := make([]newOrder, len(members))
	for i, r := range members {
		orders[i] = *r.order
	}
	slices.SortFunc(orders, func(x, y newOrder) int { return cmp.Compare(x.id, y.id) })
	var short []string
	err := b.withReclaim(ctx, conn, func() []string { return short }, func(mayReclaim bool) error {
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
			var err error
			short, err = b.decide(ctx, tx, members, mayReclaim)
			return err
		})
	})
	if errors.Is(err, errDuplicate) {
		return b.settleRecorded(ctx, conn, members)
	}
	return err
}

// decide locks the rows of members' SKUs in SKU order, grants the members
// whose lines all fit, in arrival order, and takes their units in tx. A
// member it refuses gets its own error in refused (and its record is
// deleted), which stands even if COMMIT fails. Before it refuses anyone
// for want of units, when mayReclaim, it looks for expired holds of the
// short SKUs and, if there are any, returns those SKUs and errReclaim (see
// withReclaim).
func (b *Batched) decide(ctx context.Context, tx *sqlx.Tx, members []*request, mayReclaim bool) ([]string, error) {
	want := map[string]bool{}
	for _, r := range members {
		for _, ln := range r.order.lines {
			want[ln.SKU] = true
		}
	}
	have := make(map[string]int64, len(want))
	err := eachRow(ctx, tx, b.lq.lockLevels, []any{slices.Sorted(maps.Keys(want))}, func(rows *sql.Rows) error {
		var sku string
		var qty int64
		err := rows.Scan(&sku, &qty)
		have[sku] = qty
		return err
	})
	if err != nil {
		return nil, err
	}
	taken := map[string]int64{}
	short := map[string]bool{}
	var refused []*request
	for _, r := range members {
		r.refused = fits(have, r.order.lines, short)
		if r.refused != nil {
			refused = append(refused, r)
			continue
		}
		for _, ln := range r.order.lines {
			have[ln.SKU] -= ln.Qty
			taken[ln.SKU] += ln.Qty
		}
	}
	if len(short) > 0 && mayReclaim {
		var expired []string
		if err := tx.SelectContext(ctx, &expired, b.lq.expiredOf, slices.Sorted(maps.Keys(short))); err != nil {
			return nil, classify(ctx, err, unsent)
		}
		if len(expired) > 0 {
			return expired, errReclaim
		}
	}
	if len(taken) == 0 {
		return nil, errNothingGranted
	}
	if err := b.unrecord(ctx, tx, refused); err != nil {
		return nil, err
	}
	skus := slices.Sorted(maps.Keys(taken))
	qtys := make([]int64, len(skus))
	for i, sku := range skus {
		qtys[i] = taken[sku]
	}
	// The rows are locked and hold every unit granted: the UPDATE's
	// condition holds on each.
	_, err = tx.ExecContext(ctx, b.lq.multiTake, skus, qtys)
	return nil, classify(ctx, err, unsent)
}

// fits is nil when every line fits in have, else the refusal of the
// order: ErrUnknownSKU for a line without a row, before
// ErrInsufficientStock for the first line (in SKU order) with too few
// units; it marks the SKUs of the lines short of units in short.
func fits(have map[string]int64, lines []stockguard.Line, short map[string]bool) error {
	for _, ln := range lines {
		if _, ok := have[ln.SKU]; !ok {
			return unknownSKU(ln.SKU)
		}
	}
	var refusal error
	for _, ln := range lines {
		if left := have[ln.SKU]; ln.Qty > left {
			short[ln.SKU] = true
			if refusal == nil {
				refusal = insufficient(ln.SKU, ln.Qty, left)
			}
		}
	}
	return refusal
}
