package pglock

import (
	"context"
	"database/sql"
	"fmt"
	"time"

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
// is remembered for good, and the ledger grows by one order row and a row
// per line with every order.
//
// What it deletes is safe to forget: a returned or expired order has given
// its units back, a restock has added its units, and a taken order's units
// are gone for good — they leave the units counted as out on open orders,
// which no Return can bring back any more. A held order is never deleted,
// whatever its age. Once deleted, an ID is unknown: Confirm, Return and
// Order report stockguard.ErrUnknownOrder, and a Take, Hold or Restock
// under it is applied afresh. So keep the retention well above the
// longest time a caller may retry a call, or return a taken order.
//
// It scans the whole ledger in ID order, purgeBatch orders per read, each
// deletion a short transaction of its own, so that it can run beside live
// traffic; run it now and then (say, daily) from one process. Its errors
// are those of the Orders methods.
func PurgeOrders(ctx context.Context, db *sqlx.DB, opts ...Option) (purged int64, err error) {
	o, err := build("PurgeOrders", db, readsPurge, opts)
	if err != nil {
		return 0, err
	}
	if err := strategy.Canceled(ctx); err != nil {
		return 0, err
	}
	l := newLedger(db, o, nil)
	cutoff := cutoffSQL(o.retention)
	scan := fmt.Sprintf("SELECT id, COALESCE(state = %d AND deadline <= %s, FALSE), state <> %d AND changed_at < %s FROM %s WHERE id > $1 ORDER BY id LIMIT %d",
		stockguard.OrderHeld, now, stockguard.OrderHeld, cutoff, l.lq.orders, purgeBatch)
	err = l.pinned(ctx, nil, func(conn *sqlx.Conn) error {
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
				deleted, err := l.purge(ctx, conn, old, cutoff)
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

// cutoffSQL is the server's clock less the retention d.
func cutoffSQL(d time.Duration) string {
	return fmt.Sprintf("%s - %d * interval '1 microsecond'", now, micros(d))
}

// purge deletes the records of ids (sorted) that are still closed and
// older than cutoff, under their rows' locks (orders, then stock rows in
// SKU order: the ledger's lock order), takes the units of the taken ones
// off their SKUs' on_orders, and returns how many it deleted.
func (l *ledger) purge(ctx context.Context, conn *sqlx.Conn, ids []string, cutoff string) (int64, error) {
	var n int64
	err := inTx(ctx, conn, nil, func(tx *sqlx.Tx) error {
		var due []string
		if err := tx.SelectContext(ctx, &due, fmt.Sprintf("SELECT id FROM %s WHERE id = ANY($1) AND state <> %d AND changed_at < %s ORDER BY id FOR UPDATE",
			l.lq.orders, stockguard.OrderHeld, cutoff), ids); err != nil || len(due) == 0 {
			return classify(ctx, err, unsent)
		}
		var skus []string
		var qtys []int64
		err := eachRow(ctx, tx, fmt.Sprintf("SELECT l.sku, SUM(l.qty)::bigint FROM %s l JOIN %s o ON o.id = l.order_id WHERE o.id = ANY($1) AND o.kind <> %d AND o.state = %d GROUP BY l.sku ORDER BY l.sku",
			l.lq.lines, l.lq.orders, kindRestock, stockguard.OrderTaken), []any{due}, func(rows *sql.Rows) error {
			var sku string
			var qty int64
			err := rows.Scan(&sku, &qty)
			skus, qtys = append(skus, sku), append(qtys, qty)
			return err
		})
		if err != nil {
			return err
		}
		if len(skus) > 0 {
			if _, err := tx.ExecContext(ctx, l.lq.lockSKUs, skus); err != nil {
				return classify(ctx, err, unsent)
			}
			if _, err := tx.ExecContext(ctx, "UPDATE "+l.lq.stock+" t SET on_orders = t.on_orders - v.qty FROM unnest($1::text[], $2::bigint[]) AS v(sku, qty) WHERE t.sku = v.sku", skus, qtys); err != nil {
				return classify(ctx, err, unsent)
			}
		}
		if _, err := tx.ExecContext(ctx, "DELETE FROM "+l.lq.lines+" WHERE order_id = ANY($1)", due); err != nil {
			return classify(ctx, err, unsent)
		}
		res, err := tx.ExecContext(ctx, "DELETE FROM "+l.lq.orders+" WHERE id = ANY($1)", due)
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
