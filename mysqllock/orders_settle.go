package mysqllock

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/jmoiron/sqlx"
	"github.com/stockguard/stockguard"
)

// settleFast is placeFast for a batch with Confirm or Return calls, on a
// multiStatements pool: two round trips and no locking read. The first
// reads the records of the Confirm and Return IDs, locking nothing — after
// START TRANSACTION and the INSERTs that record the batch's Takes and
// Holds, if any, so that their IDs are locked before seal is called (see
// Batched.writeOrders); the second is the rest of the transaction, each
// change conditional on what was read:
//
//	[START TRANSACTION; SET @stockguard_now …; INSERT INTO orders …; INSERT INTO order_lines …;]  -- the batch's Takes and Holds (lines: holds only)
//	SELECT … FROM orders JOIN lines WHERE id IN (…)
//
//	[START TRANSACTION;]  -- when the first round trip did not
//	UPDATE orders SET state = … WHERE id IN (…) AND (the state read, a Confirm's hold not expired)
//	SET @… = (overflows unless ROW_COUNT() = the calls): rowCheck
//	UPDATE order_lines SET expires = NULL WHERE order_id IN (…)   -- the holds settled
//	UPDATE stock SET qty = qty + CASE sku … END WHERE sku IN (…) AND qty + CASE sku … END >= 0
//	SET @… = (overflows unless ROW_COUNT() = the SKUs)
//	COMMIT
//
// Lines never change once recorded, so the units a Return gives back are
// the ones read; the state is what may have moved since, and the UPDATE
// checks it under the order row's lock. The stock rows change by the
// batch's net units per SKU, locked only by the last UPDATE before COMMIT.
// The batch is granted whole when its net units fit — a valid order of
// calls that were all in flight at once. It reports false, having changed
// nothing, when the batch must go the locking way: a call other than a
// Confirm of a hold not yet expired or a Return of an open order (unknown
// ID, closed, restock, expired), a check that failed, or a recorded ID.
// When seal reports false it ends with errLeft, having changed nothing.
func (b *Batched) settleFast(ctx context.Context, conn *sqlx.Conn, orders []newOrder, take map[string]int64, settles []orderCall, seal func() bool) (bool, error) {
	ids := make([]any, len(settles))
	for i, c := range settles {
		ids[i] = c.order.id
	}
	slices.SortFunc(ids, func(x, y any) int { return cmp.Compare(x.(string), y.(string)) })
	records := make(map[string]orderRecord, len(ids))
	read := func(rows *sql.Rows) error { return scanRecord(rows, records) }
	var q []string
	var args []any
	var err error
	open := len(orders) > 0
	if open {
		r := b.recordStmts(orders)
		err = openMulti(ctx, conn, strings.Join(append(r.stmts, b.lq.records(len(ids))), "; "), append(r.allArgs(), ids...), read)
		if errors.Is(err, errDuplicate) {
			return false, nil
		}
	} else {
		err = eachRow(ctx, conn, b.lq.records(len(ids)), ids, read)
		q = []string{"START TRANSACTION"}
	}
	if err != nil {
		return true, err
	}
	// The locking way, having changed nothing.
	lockingWay := func() (bool, error) {
		if open {
			rollback(ctx, conn)
		}
		return false, nil
	}
	net := make(map[string]int64, len(take))
	for sku, qty := range take {
		net[sku] = -qty
	}
	var confirms, fromTaken, fromHeld []any
	for _, c := range settles {
		rec, ok := records[c.order.id]
		switch {
		case !ok, rec.kind == kindRestock, rec.state == stockguard.OrderHeld && rec.expired:
			return lockingWay()
		case c.op == opConfirm && rec.state == stockguard.OrderHeld:
			confirms = append(confirms, c.order.id)
			continue
		case c.op == opReturn && rec.state == stockguard.OrderHeld:
			fromHeld = append(fromHeld, c.order.id)
		case c.op == opReturn && rec.state == stockguard.OrderTaken:
			fromTaken = append(fromTaken, c.order.id)
		default:
			return lockingWay() // answered from the record: the locking way does that
		}
		for _, ln := range rec.lines {
			net[ln.SKU] += ln.Qty
		}
	}
	if !seal() {
		if open {
			rollback(ctx, conn)
		}
		return true, errLeft
	}

	// A Return of a hold that expires meanwhile ends it expired: its units
	// come back all the same, as on the locking way.
	var sb strings.Builder
	var cond []string
	fmt.Fprintf(&sb, "UPDATE %s SET state = CASE WHEN state = %d THEN %d WHEN deadline > %s AND id IN (%s) THEN %d WHEN deadline <= %s THEN %d ELSE %d END, changed_at = %s WHERE id IN (%s) AND (",
		b.lq.orders, stockguard.OrderTaken, stockguard.OrderReturned, now, list(max(1, len(confirms))), stockguard.OrderTaken, now, stockguard.OrderExpired, stockguard.OrderReturned, now, list(len(ids)))
	args = append(args, orNone(confirms)...)
	args = append(args, ids...)
	if len(confirms) > 0 {
		cond = append(cond, fmt.Sprintf("(state = %d AND deadline > %s AND id IN (%s))", stockguard.OrderHeld, now, list(len(confirms))))
		args = append(args, confirms...)
	}
	if len(fromHeld) > 0 {
		cond = append(cond, fmt.Sprintf("(state = %d AND id IN (%s))", stockguard.OrderHeld, list(len(fromHeld))))
		args = append(args, fromHeld...)
	}
	if len(fromTaken) > 0 {
		cond = append(cond, fmt.Sprintf("(state = %d AND id IN (%s))", stockguard.OrderTaken, list(len(fromTaken))))
		args = append(args, fromTaken...)
	}
	sb.WriteString(strings.Join(cond, " OR ") + ")")
	q = append(q, sb.String(), rowCheck)
	args = append(args, len(ids))
	if held := slices.Concat(confirms, fromHeld); len(held) > 0 {
		q = append(q, "UPDATE "+b.lq.lines+" SET expires = NULL WHERE order_id IN ("+list(len(held))+")")
		args = append(args, held...)
	}
	var lines []stockguard.Line
	for sku, d := range net {
		if d != 0 {
			lines = append(lines, stockguard.Line{SKU: sku, Qty: d})
		}
	}
	if len(lines) > 0 {
		slices.SortFunc(lines, func(x, y stockguard.Line) int { return cmp.Compare(x.SKU, y.SKU) })
		cases, caseArgs := caseSKU(lines)
		in := make([]any, len(lines))
		for i, ln := range lines {
			in[i] = ln.SKU
		}
		q = append(q, "UPDATE "+b.lq.stock+" SET "+moveUnits(cases)+", version = version + 1 WHERE sku IN ("+list(len(lines))+") AND qty + "+cases+" >= 0", rowCheck)
		args = slices.Concat(args, caseArgs, caseArgs, in, caseArgs, []any{len(lines)})
	}
	err = runMulti(ctx, conn, strings.Join(append(q, "COMMIT"), "; "), args)
	switch {
	case err == nil:
		return true, nil
	case errors.Is(err, errShort), errors.Is(err, errDuplicate):
		return false, nil
	}
	return true, err
}

// orNone returns ids, or a single NULL that matches no ID.
func orNone(ids []any) []any {
	if len(ids) == 0 {
		return []any{nil}
	}
	return ids
}
