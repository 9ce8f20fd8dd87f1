package mysqllock

import (
	"context"
	"database/sql"
	"fmt"
	"slices"

	"github.com/jmoiron/sqlx"
	"github.com/stockguard/stockguard"
	"github.com/stockguard/stockguard/strategy"
)

// purgeBatch is how many orders PurgeOrders reads, and deletes, at a time.
const purgeBatch = 500

// PurgeOrders deletes from the order ledger of db's table (options read:
// WithTable, WithOrderRetention) the records of orders that are no longer
// held and have not changed for the retention, and reclaims on the way
// every hold whose deadline has passed. It returns how many records it
// deleted. Nothing else ever deletes a record: without PurgeOrders every ID
// is remembered for good, and the ledger grows by one order row with every
// order, and a row per line with every hold (see the package benchmarks
// for their size).
//
// What it deletes is safe to forget: a returned or expired order has given
// its units back, a restock has added its units, and a taken order's units
// are gone for good — the stock is right without them, and they leave the
// units counted as out on open orders, which no Return can bring back. A held order is
// never deleted, whatever its age. Once deleted, an ID is unknown:
// Confirm, Return and Order report stockguard.ErrUnknownOrder, and a Take,
// Hold or Restock under it is applied afresh. So keep the retention well
// above the longest time a caller may retry a call, or return a taken
// order.
//
// It scans the whole ledger in primary-key order, purgeBatch orders per
// read, each deletion a short transaction of its own, so that it can run
// beside live traffic; run it now and then (say, daily) from one process.
// Its errors are those of the Orders methods.
func PurgeOrders(ctx context.Context, db *sqlx.DB, opts ...Option) (purged int64, err error) {
	o, err := build("PurgeOrders", db, readsPurge, opts)
	if err != nil {
		return 0, err
	}
	if err := strategy.Canceled(ctx); err != nil {
		return 0, err
	}
	l := newLedger(db, o, nil)
	cutoff := fmt.Sprintf("%s - INTERVAL %d MICROSECOND", now, micros(o.retention))
	scan := fmt.Sprintf("SELECT id, COALESCE(state = %d AND deadline <= %s, FALSE), state <> %d AND changed_at < %s FROM %s WHERE id > ? ORDER BY id LIMIT %d",
		stockguard.OrderHeld, now, stockguard.OrderHeld, cutoff, l.lq.orders, purgeBatch)
	err = l.pinned(ctx, nil, func(ctx context.Context, conn *sqlx.Conn) error {
		after := ""
		for {
			var expired, old []string
			n := 0
			err := eachRow(ctx, conn, scan, []any{after}, func(rows *sql.Rows) error {
				var isExpired, isOld bool
				err := rows.Scan(&after, &isExpired, &isOld)
				n++
				switch {
				case isExpired:
					expired = append(expired, after)
				case isOld:
					old = append(old, after)
				}
				return err
			})
			if err != nil {
				return err
			}
			if len(expired) > 0 {
				if _, err := l.expire(ctx, conn, expired); err != nil {
					return err
				}
			}
			if len(old) > 0 {
				deleted, err := l.purge(ctx, conn, o.table, old, cutoff)
				if err != nil {
					return err
				}
				purged += deleted
			}
			if n < purgeBatch {
				return nil
			}
		}
	})
	return purged, err
}

// purge deletes the records of ids (sorted) of table's ledger that are
// still closed and older than cutoff, under their rows' locks, takes the
// units of the taken ones off their SKUs' on_orders (no Return can bring
// them back any more), and returns how many it deleted.
func (l *ledger) purge(ctx context.Context, conn *sqlx.Conn, table string, ids []string, cutoff string) (int64, error) {
	var n int64
	err := inTx(ctx, conn, func(tx *sqlx.Tx) error {
		in := make([]any, len(ids))
		for i, id := range ids {
			in[i] = id
		}
		var due []string
		if err := selectBound(ctx, tx, &due, fmt.Sprintf("SELECT id FROM %s WHERE id IN (%s) AND state <> %d AND changed_at < %s ORDER BY id FOR UPDATE",
			l.lq.orders, list(len(in)), stockguard.OrderHeld, cutoff), in...); err != nil || len(due) == 0 {
			return classify(ctx, err, unsent)
		}
		in = in[:0]
		for _, id := range due {
			in = append(in, id)
		}
		ins := list(len(in))
		// The stock rows after the order rows, one by one in SKU order:
		// the ledger's lock order.
		taken := fmt.Sprintf("o.id IN (%s) AND o.kind <> %d AND o.state = %d", ins, kindRestock, stockguard.OrderTaken)
		var skus []string
		var units []int64
		err := eachRow(ctx, tx, "SELECT sku, units FROM ("+unitsSQL(table, taken)+") u ORDER BY sku", append(slices.Clone(in), in...), func(rows *sql.Rows) error {
			var sku string
			var n int64
			err := rows.Scan(&sku, &n)
			skus, units = append(skus, sku), append(units, n)
			return err
		})
		if err != nil {
			return err
		}
		for i, sku := range skus {
			if _, err := execBound(ctx, tx, "UPDATE "+l.lq.stock+" SET on_orders = on_orders - ? WHERE sku = ?", units[i], sku); err != nil {
				return classify(ctx, err, unsent)
			}
		}
		if _, err := execBound(ctx, tx, "DELETE FROM "+l.lq.lines+" WHERE order_id IN ("+ins+")", in...); err != nil {
			return classify(ctx, err, unsent)
		}
		res, err := execBound(ctx, tx, "DELETE FROM "+l.lq.orders+" WHERE id IN ("+ins+")", in...)
		if err == nil {
			n, err = res.RowsAffected()
		}
		return classify(ctx, err, unsent)
	})
	if err != nil {
		return 0, err
	}
	return n, nil
}
