package mysqllock

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/stockguard/stockguard"
	"github.com/stockguard/stockguard/internal/errtext"
	"github.com/stockguard/stockguard/internal/room"
	"github.com/stockguard/stockguard/strategy"
)

// The Orders methods of NewAtomic and NewBatched. Each call is one
// transaction that records the order and its lines in the ledger
// (CreateSchema's <table>_orders, and <table>_order_lines for a hold's
// lines) and changes the stock, or changes nothing; a call whose ID is
// recorded already is answered from the record. Holds keep a deadline by
// the server's clock and need no sweeper: an expired hold's units go back,
// exactly once, as soon as anything — Stock, Order, Return, or a request
// that would otherwise be refused for want of them — looks at it. How long
// IDs are remembered: see PurgeOrders.
//
// Every method returns nil or an error satisfying errors.Is for exactly one
// of: the errors the stockguard.Orders contract names for it,
// stockguard.ErrInvalidRequest (bad arguments or options, before any I/O),
// ErrContention (a row stayed busy, deadlock retries ran out: nothing
// changed), ErrUnavailable (no connection, a missing table, the server
// refusing the request: nothing changed), ErrOutcomeUnknown (Take, Hold,
// Confirm, Return and Restock only: the COMMIT's reply was lost; repeat
// the call with the same arguments, which ends in the state one successful
// call would have left), or the context's error (nothing changed).

// Take takes every line, or none, for good under id, in one transaction;
// lines are locked in SKU order, so two carts never deadlock. It returns
// nil (also for a retry of an order held or taken), or an error wrapping
// stockguard.ErrInsufficientStock or ErrUnknownSKU (nothing recorded),
// ErrOrderClosed (id was returned or expired), ErrOrderMismatch (id was
// applied otherwise: with other lines, by Hold, or by Restock), or one of
// the errors every method returns (ErrInvalidRequest, ErrContention,
// ErrUnavailable, ErrOutcomeUnknown, the context's error).
func (l *ledger) Take(ctx context.Context, id string, lines ...stockguard.Line) error {
	if err := l.check(ctx, strategy.ValidateTake(id, lines)); err != nil {
		return err
	}
	return l.place(ctx, newOrder{id: id, kind: kindTake, lines: strategy.SortedLines(lines)})
}

// Hold takes every line, or none, under id until Confirm, Return, or ttl
// has passed by the server's clock, whichever comes first. It returns as
// Take does.
func (l *ledger) Hold(ctx context.Context, id string, ttl time.Duration, lines ...stockguard.Line) error {
	if err := l.check(ctx, strategy.ValidateHold(id, ttl, lines)); err != nil {
		return err
	}
	return l.place(ctx, newOrder{id: id, kind: kindHold, ttl: ttl, lines: strategy.SortedLines(lines)})
}

// place records o and takes its lines in one transaction.
func (l *ledger) place(ctx context.Context, o newOrder) error {
	return l.retrier.Do(ctx, func(ctx context.Context) error {
		return l.pinned(ctx, l.session, func(ctx context.Context, conn *sqlx.Conn) error {
			multi, err := l.multiStatements(ctx, conn)
			if err != nil {
				return err
			}
			return l.settle(ctx, conn, l.placeAll(ctx, conn, multi, []newOrder{o}, o.lines, nil), o)
		})
	})
}

// placeAll records orders (distinct IDs, in ID order) and takes lines —
// their units summed per SKU, in SKU order — in one transaction, locking
// the stock rows only with the UPDATE that takes them, right before
// COMMIT; in two round trips when multi (see placeMulti). It returns nil,
// errShort (a line did not fit) or errDuplicate (an ID is recorded
// already) when the transaction rolled back, or the transaction's
// classified error. seal, unless nil, is called once the orders' IDs are
// locked, before anything can commit (see Batched.writeOrders): false
// ends with errLeft, nothing written.
func (l *ledger) placeAll(ctx context.Context, conn *sqlx.Conn, multi bool, orders []newOrder, lines []stockguard.Line, seal func() bool) error {
	if multi {
		return l.placeMulti(ctx, conn, orders, lines, seal)
	}
	return inTx(ctx, conn, func(tx *sqlx.Tx) error {
		if err := l.fenced(ctx, tx); err != nil {
			return err
		}
		if err := l.record(ctx, tx, orders); err != nil {
			return err
		}
		// The orders' IDs are locked now: one whose caller leaves from
		// here on is answered ErrOutcomeUnknown, and a repeat waits for
		// this transaction (see Batched.writeOrders).
		if seal != nil && !seal() {
			return errLeft
		}
		return l.takeLines(ctx, tx, lines, true)
	})
}

// Confirm makes the hold under id taken for good. It returns nil (also for
// an order taken already), or an error wrapping stockguard.ErrOrderClosed
// (returned, or its deadline passed), ErrUnknownOrder, ErrOrderMismatch
// (id was applied by Restock), or one of the errors every method returns.
func (l *ledger) Confirm(ctx context.Context, id string) error {
	if err := l.check(ctx, strategy.ValidateID(id)); err != nil {
		return err
	}
	return l.retrier.Do(ctx, func(ctx context.Context) error {
		return l.pinned(ctx, l.session, func(ctx context.Context, conn *sqlx.Conn) error {
			err := inTx(ctx, conn, func(tx *sqlx.Tx) error {
				if err := l.fenced(ctx, tx); err != nil {
					return err
				}
				// Check and change in one statement, under the row's lock:
				// a hold is confirmed only before its deadline, and then no
				// reclaim can end it.
				res, err := execBound(ctx, tx, l.lq.confirm, id)
				if err != nil {
					return classify(ctx, err, unsent)
				}
				if n, err := res.RowsAffected(); err != nil || n == 1 {
					if err == nil {
						_, err = execBound(ctx, tx, l.lq.clearExpires, id)
					}
					return classify(ctx, err, unsent)
				}
				h, err := l.lockOrder(ctx, tx, id)
				switch {
				case err != nil:
					return err
				case h.kind == kindRestock:
					return mismatch(id, h.kind)
				case h.state == stockguard.OrderTaken:
					return errNoChange
				case h.state == stockguard.OrderHeld && !h.expired:
					return strategy.Retry(errChanged) // the deadline moved? never: the row is locked
				}
				return errtext.Closed(id, h.effective())
			})
			if errors.Is(err, errNoChange) {
				return nil
			}
			return err
		})
	})
}

// Return gives the units of the order under id back, exactly once: it
// returns nil for an order held, taken, returned or expired, or an error
// wrapping stockguard.ErrUnknownOrder, ErrOrderMismatch (id was applied by
// Restock), or one of the errors every method returns. It is never refused
// for want of room under stockguard.MaxQty: Restock and SetStock keep room
// for every unit out on an open order.
func (l *ledger) Return(ctx context.Context, id string) error {
	if err := l.check(ctx, strategy.ValidateID(id)); err != nil {
		return err
	}
	return l.retrier.Do(ctx, func(ctx context.Context) error {
		return l.pinned(ctx, l.session, func(ctx context.Context, conn *sqlx.Conn) error {
			err := inTx(ctx, conn, func(tx *sqlx.Tx) error {
				if err := l.fenced(ctx, tx); err != nil {
					return err
				}
				h, err := l.lockOrder(ctx, tx, id)
				switch {
				case err != nil:
					return err
				case h.kind == kindRestock:
					return mismatch(id, h.kind)
				case h.state == stockguard.OrderHeld && h.expired:
					// Its units are due back anyway; give them back now.
					_, err := l.expireIn(ctx, tx, []string{id})
					return err
				case !h.state.Open():
					return errNoChange
				}
				lines := h.lines // a Take's, from its row; a hold's are rows of their own
				if len(lines) == 0 {
					err = eachRow(ctx, tx, l.lq.orderLines, []any{id}, func(rows *sql.Rows) error {
						var ln stockguard.Line
						err := rows.Scan(&ln.SKU, &ln.Qty)
						lines = append(lines, ln)
						return err
					})
					if err != nil {
						return err
					}
				}
				if _, err := execBound(ctx, tx, l.lq.setState, stockguard.OrderReturned, id); err != nil {
					return classify(ctx, err, unsent)
				}
				if h.state == stockguard.OrderHeld {
					if _, err := execBound(ctx, tx, l.lq.clearExpires, id); err != nil {
						return classify(ctx, err, unsent)
					}
				}
				return l.credit(ctx, tx, lines)
			})
			if errors.Is(err, errNoChange) {
				return nil
			}
			return err
		})
	})
}

// lockOrder reads and locks id's order row in tx: ErrUnknownOrder when
// there is none. The record's lines are those of its line_list, none for
// an order whose lines are rows of the lines table.
func (l *ledger) lockOrder(ctx context.Context, tx *sqlx.Tx, id string) (orderRecord, error) {
	var h orderRecord
	var list []byte
	err := rowBound(ctx, tx, l.lq.lockOrder, id).Scan(&h.kind, &h.state, &h.expired, &list)
	if errors.Is(err, sql.ErrNoRows) {
		return h, unknownOrder(id)
	}
	if err == nil {
		err = h.addLines(list, sql.NullString{}, sql.NullInt64{})
	}
	return h, classify(ctx, err, unsent)
}

// Restock adds qty units to sku once under id. It returns nil (also for a
// retry), or an error wrapping stockguard.ErrUnknownSKU (nothing recorded),
// ErrOrderMismatch (id was applied otherwise, by any Orders method —
// Take, Hold or an earlier Restock with other arguments), ErrInvalidRequest
// (bad arguments, before any I/O; or the level plus the units out on open
// orders plus qty would pass stockguard.MaxQty, so that a Return could
// not fit: nothing recorded), or one of the errors every method returns.
func (l *ledger) Restock(ctx context.Context, id, sku string, qty int64) error {
	if err := l.check(ctx, strategy.ValidateRestock(id, sku, qty)); err != nil {
		return err
	}
	o := newOrder{id: id, kind: kindRestock, lines: []stockguard.Line{{SKU: sku, Qty: qty}}}
	return l.retrier.Do(ctx, func(ctx context.Context) error {
		return l.pinned(ctx, l.session, func(ctx context.Context, conn *sqlx.Conn) error {
			err := inTxOpts(ctx, conn, readCommitted, func(tx *sqlx.Tx) error {
				if err := l.record(ctx, tx, []newOrder{o}); err != nil {
					return err
				}
				if err := l.room(ctx, tx, sku, qty); err != nil {
					return err
				}
				_, err := execBound(ctx, tx, l.lq.restock, qty, sku, stockguard.MaxQty-qty)
				return classify(ctx, err, unsent)
			})
			return l.settle(ctx, conn, err, o)
		})
	})
}

// room checks, in tx, that qty more units of sku fit beside its level and
// the units out on open orders, which may all come back: ErrUnknownSKU
// without a row, ErrInvalidRequest when they would pass stockguard.MaxQty.
func (l *ledger) room(ctx context.Context, tx *sqlx.Tx, sku string, qty int64) error {
	have, out, err := l.units(ctx, tx, sku)
	if err != nil {
		return err
	}
	return room.Restock(sku, have, out, qty)
}

// units locks sku's row in tx, which runs under READ COMMITTED, and reads
// its level and the units out on open orders (held or taken), the row's
// on_orders: ErrUnknownSKU without a row. Every Take, Hold, Return and
// reclaim of sku moves units between the two in one UPDATE of the row.
func (l *ledger) units(ctx context.Context, tx *sqlx.Tx, sku string) (have, out int64, err error) {
	err = rowBound(ctx, tx, l.lq.lockUnits, sku).Scan(&have, &out)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, 0, unknownSKU(sku)
	}
	return have, out, classify(ctx, err, unsent)
}

// SetStock creates sku with qty units, or overwrites its level, as the
// store's SetStock does, and refuses a level that would leave no room for
// the units out on open orders to come back. The units of holds past their
// deadline are back on the shelf already, so the level set replaces them:
// it reclaims those holds in the same transaction, and no later reclaim
// adds them again. It returns nil, or an error
// wrapping stockguard.ErrInvalidRequest (bad arguments, before any I/O;
// or qty plus the units out on open orders would pass stockguard.MaxQty:
// nothing changed), ErrContention (the row stayed busy), ErrUnavailable
// (nothing changed), ErrOutcomeUnknown (the COMMIT's reply was lost) or
// the context's error.
func (l *ledger) SetStock(ctx context.Context, sku string, qty int64) error {
	if err := l.check(ctx, strategy.ValidateSet(sku, qty)); err != nil {
		return err
	}
	return l.retrier.Do(ctx, func(ctx context.Context) error {
		return l.pinned(ctx, l.session, func(ctx context.Context, conn *sqlx.Conn) error {
			return inTxOpts(ctx, conn, readCommitted, func(tx *sqlx.Tx) error {
				// The expired holds' order rows before the stock row: the
				// lock order.
				_, err := l.reclaimIn(ctx, tx, sku)
				ledgered := !isServerError(err, erNoSuchTable) // without a ledger, no holds
				if err != nil && ledgered {
					return err
				}
				_, out, err := l.units(ctx, tx, sku)
				switch {
				case errors.Is(err, stockguard.ErrUnknownSKU), isServerError(err, erBadField):
					// A new SKU, or a stock table made before the ledger
					// (no on_orders; CreateSchema adds it): no units out.
				case err != nil:
					return err
				default:
					if err := room.Set(sku, qty, out); err != nil {
						return err
					}
					if ledgered {
						if err := l.noneExpired(ctx, tx, sku); err != nil {
							return err
						}
					}
				}
				_, err = execBound(ctx, tx, l.q.setStock, sku, qty, qty)
				return classify(ctx, err, unsent)
			})
		})
	})
}

// noneExpired checks, in tx, which has locked sku's row, that no hold of
// sku has passed its deadline since the reclaim before the lock. Such a
// hold's units are back, yet its reclaim waits for the row, and would add
// them on top of the level set: the attempt starts again, to reclaim it
// first. Reading what was committed, it also sees a reclaim that is
// waiting for the row as not done yet.
func (l *ledger) noneExpired(ctx context.Context, tx *sqlx.Tx, sku string) error {
	var expired bool
	if err := rowBound(ctx, tx, l.lq.hasExpired, sku).Scan(&expired); err != nil {
		return classify(ctx, err, unsent)
	}
	if expired {
		return strategy.Retry(errChanged)
	}
	return nil
}

// Order reports the order applied under id; a hold past its deadline is
// OrderExpired, and its units go back now if nothing has reclaimed them
// yet. It returns an error wrapping stockguard.ErrUnknownOrder,
// ErrOrderMismatch (id was applied by Restock, which is no order),
// ErrInvalidRequest, ErrContention, ErrUnavailable (also when the reclaim's
// COMMIT reply was lost: never ErrOutcomeUnknown) or the context's error.
func (l *ledger) Order(ctx context.Context, id string) (stockguard.OrderInfo, error) {
	if err := l.check(ctx, strategy.ValidateID(id)); err != nil {
		return stockguard.OrderInfo{}, err
	}
	// The read runs on a supervised goroutine that may outlive this call
	// when ctx ends: it hands its result over atomically.
	var found atomic.Pointer[stockguard.OrderInfo]
	err := l.retrier.Do(ctx, func(ctx context.Context) error {
		return l.pinned(ctx, l.session, func(ctx context.Context, conn *sqlx.Conn) error {
			rec, ok, err := l.read(ctx, conn, id)
			if err != nil {
				return err
			}
			info, due, err := answerOf(id, rec, ok)
			if err != nil {
				return err
			}
			if due {
				// Reclaim it, then report what the reclaim found: a Confirm
				// that beat the deadline may have made it taken meanwhile.
				if _, err := l.expire(ctx, conn, []string{id}); err != nil {
					return err
				}
				if rec, _, err = l.read(ctx, conn, id); err != nil {
					return err
				}
				if rec.state == stockguard.OrderHeld {
					return strategy.Retry(errChanged)
				}
				info = infoOf(id, rec)
			}
			found.Store(&info)
			return nil
		})
	})
	info := found.Load()
	if err != nil || info == nil {
		return stockguard.OrderInfo{}, readOnly(err)
	}
	return *info, nil
}

// answerOf is Order's answer from id's record rec (ok: id has one), or due
// when rec is a hold past its deadline, to reclaim before answering.
func answerOf(id string, rec orderRecord, ok bool) (info stockguard.OrderInfo, due bool, err error) {
	switch {
	case !ok:
		return info, false, unknownOrder(id)
	case rec.kind == kindRestock:
		return info, false, mismatch(id, rec.kind)
	case rec.state == stockguard.OrderHeld && rec.expired:
		return info, true, nil
	}
	return infoOf(id, rec), false, nil
}

// infoOf is Order's answer from rec, id's record.
func infoOf(id string, rec orderRecord) stockguard.OrderInfo {
	info := stockguard.OrderInfo{ID: id, State: rec.state, Lines: rec.lines}
	// A confirmed hold is taken and expires no more: no deadline.
	if rec.deadline.Valid && rec.state != stockguard.OrderTaken {
		info.Deadline = time.UnixMicro(rec.deadline.Int64)
	}
	return info
}

// readOnly is the error of a read (Order, Stock) whose reclaim of expired
// holds may have lost its COMMIT's reply: nothing of the caller's is in
// doubt — the reclaim gives back units due back anyway, exactly once — so
// it could just not be served (ErrUnavailable), never ErrOutcomeUnknown.
func readOnly(err error) error {
	if errors.Is(err, stockguard.ErrOutcomeUnknown) {
		return fmt.Errorf("%w: the reclaim of expired holds was cut short: %v", stockguard.ErrUnavailable, err)
	}
	return err
}

// Stock returns the units of sku left, counting those of expired holds,
// which it reclaims first. It returns an error wrapping
// stockguard.ErrUnknownSKU when sku was never stocked, ErrInvalidRequest,
// ErrContention (expired holds kept turning up faster than it could
// reclaim them, or a deadlock while reclaiming; nothing is lost),
// ErrUnavailable (the read failed) or the context's error.
//
// The level it reports comes from a statement that also found no expired
// hold of sku: one snapshot in which every hold is either still held or
// back in the level. A reclaiming transaction's own reads would not do:
// under REPEATABLE READ they see the snapshot of its first read, which can
// predate a reclaim another session committed meanwhile — a hold neither
// held nor back.
func (l *ledger) Stock(ctx context.Context, sku string) (int64, error) {
	if err := l.check(ctx, strategy.ValidateSKU(sku)); err != nil {
		return 0, err
	}
	var qty int64
	err := l.retrier.Do(ctx, func(ctx context.Context) error {
		return l.pinned(ctx, l.session, func(ctx context.Context, conn *sqlx.Conn) error {
			for range stockPasses {
				var expired bool
				err := get(ctx, conn, l.lq.level, []any{sku}, &qty, &expired)
				switch {
				case isServerError(err, erNoSuchTable):
					qty, err = l.level(ctx, conn, sku) // no ledger, no holds
					return err
				case errors.Is(err, sql.ErrNoRows):
					return unknownSKU(sku)
				case err != nil || !expired:
					return classify(ctx, err, unsent)
				}
				err = inTx(ctx, conn, func(tx *sqlx.Tx) error {
					_, err := l.reclaimIn(ctx, tx, sku)
					return err
				})
				if err != nil {
					return err
				}
			}
			return strategy.Retry(errChanged)
		})
	})
	return qty, readOnly(err)
}

// stockPasses bounds how many times one attempt of Stock reclaims and
// reads again before it counts as contended: each pass reclaims every hold
// expired by its start, so only holds expiring during it need another.
const stockPasses = 8
