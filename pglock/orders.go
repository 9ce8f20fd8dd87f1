package pglock

import (
	"context"
	"database/sql"
	"errors"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/stockguard/stockguard"
	"github.com/stockguard/stockguard/internal/errtext"
	"github.com/stockguard/stockguard/internal/room"
	"github.com/stockguard/stockguard/strategy"
)

// The Orders methods of NewAtomic and NewBatched. Each call is one
// transaction that records the order and its lines in the ledger
// (CreateSchema's <table>_orders and <table>_order_lines) and changes the
// stock, or changes nothing; a call whose ID is recorded already is
// answered from the record. Holds keep a deadline by the server's clock
// and need no sweeper: an expired hold's units go back, exactly once, as
// soon as anything — Stock, Order, Return, or a request that would
// otherwise be refused for want of them — looks at it. IDs are remembered
// as long as their rows are kept: the package deletes none.
//
// Every method returns nil or an error satisfying errors.Is for exactly one
// of: the errors the stockguard.Orders contract names for it,
// stockguard.ErrInvalidRequest (bad arguments or options, before any I/O),
// ErrContention (a row stayed busy, deadlock retries ran out: nothing
// changed), ErrUnavailable (no connection, a missing table, a read-only
// server, the server refusing the request: nothing changed),
// ErrOutcomeUnknown (the COMMIT's reply was lost: repeat the call with the
// same arguments, which ends in the state one successful call would have
// left), or the context's error (nothing changed).

// Take takes every line, or none, for good under id, in one transaction;
// lines are locked in SKU order, so two carts never deadlock. It returns
// nil (also for a retry of an order held or taken), or an error wrapping
// stockguard.ErrInsufficientStock or ErrUnknownSKU (nothing recorded),
// ErrOrderClosed (id was returned or expired), ErrOrderMismatch (id was
// applied otherwise), or one of the errors every method returns.
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

// place records o and takes its lines: an order of one line in two
// pipelined round trips (placeOne), one of several in a transaction of a
// round trip per statement.
func (l *ledger) place(ctx context.Context, o newOrder) error {
	return l.retrier.Do(ctx, func(ctx context.Context) error {
		return l.pinned(ctx, l.session, func(conn *sqlx.Conn) error {
			if len(o.lines) == 1 && l.fence == nil {
				return l.settle(ctx, conn, l.placeOne(ctx, conn, o), o)
			}
			err := inTx(ctx, conn, nil, func(tx *sqlx.Tx) error {
				if err := l.fenced(ctx, tx); err != nil {
					return err
				}
				if err := l.record(ctx, tx, []newOrder{o}); err != nil {
					return err
				}
				return l.takeLines(ctx, tx, o.lines)
			})
			return l.settle(ctx, conn, err, o)
		})
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
		return l.pinned(ctx, l.session, func(conn *sqlx.Conn) error {
			err := inTx(ctx, conn, nil, func(tx *sqlx.Tx) error {
				if err := l.fenced(ctx, tx); err != nil {
					return err
				}
				// Check and change in one statement, under the row's lock:
				// a hold is confirmed only before its deadline, and then no
				// reclaim can end it.
				res, err := tx.ExecContext(ctx, l.lq.confirm, id)
				if err != nil {
					return classify(ctx, err, unsent)
				}
				if n, err := res.RowsAffected(); err != nil || n == 1 {
					if err == nil {
						_, err = tx.ExecContext(ctx, l.lq.clearExpires, id)
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
// Restock), or one of the errors every method returns.
func (l *ledger) Return(ctx context.Context, id string) error {
	if err := l.check(ctx, strategy.ValidateID(id)); err != nil {
		return err
	}
	return l.retrier.Do(ctx, func(ctx context.Context) error {
		return l.pinned(ctx, l.session, func(conn *sqlx.Conn) error {
			err := inTx(ctx, conn, nil, func(tx *sqlx.Tx) error {
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
				var lines []stockguard.Line
				err = eachRow(ctx, tx, l.lq.orderLines, []any{id}, func(rows *sql.Rows) error {
					var ln stockguard.Line
					err := rows.Scan(&ln.SKU, &ln.Qty)
					lines = append(lines, ln)
					return err
				})
				if err != nil {
					return err
				}
				if _, err := tx.ExecContext(ctx, l.lq.setState, int16(stockguard.OrderReturned), id); err != nil {
					return classify(ctx, err, unsent)
				}
				if h.state == stockguard.OrderHeld {
					if _, err := tx.ExecContext(ctx, l.lq.clearExpires, id); err != nil {
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
// there is none.
func (l *ledger) lockOrder(ctx context.Context, tx *sqlx.Tx, id string) (orderRecord, error) {
	var h orderRecord
	err := tx.QueryRowxContext(ctx, l.lq.lockOrder, id).Scan(&h.kind, &h.state, &h.expired)
	if errors.Is(err, sql.ErrNoRows) {
		return h, unknownOrder(id)
	}
	return h, classify(ctx, err, unsent)
}

// Restock adds qty units to sku once under id. It returns nil (also for a
// retry), or an error wrapping stockguard.ErrUnknownSKU (nothing recorded),
// ErrOrderMismatch (id was applied otherwise, by any Orders method — Take,
// Hold or an earlier Restock with other arguments), ErrInvalidRequest (bad
// arguments, before any I/O; or the level plus the units out on open
// orders plus qty would pass stockguard.MaxQty, so that a Return could not
// fit: nothing recorded), or one of the errors every method returns.
func (l *ledger) Restock(ctx context.Context, id, sku string, qty int64) error {
	if err := l.check(ctx, strategy.ValidateRestock(id, sku, qty)); err != nil {
		return err
	}
	o := newOrder{id: id, kind: kindRestock, lines: []stockguard.Line{{SKU: sku, Qty: qty}}}
	return l.retrier.Do(ctx, func(ctx context.Context) error {
		return l.pinned(ctx, l.session, func(conn *sqlx.Conn) error {
			err := inTx(ctx, conn, nil, func(tx *sqlx.Tx) error {
				if err := l.record(ctx, tx, []newOrder{o}); err != nil {
					return err
				}
				if err := l.room(ctx, tx, sku, qty); err != nil {
					return err
				}
				_, err := tx.ExecContext(ctx, l.lq.restock, qty, sku, stockguard.MaxQty-qty)
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

// units locks sku's row in tx and reads its level and the units out on
// open orders (held or taken), the row's on_orders: ErrUnknownSKU without
// a row. Every Take, Hold, Return and reclaim of sku moves units between
// the two in one UPDATE of the row.
func (l *ledger) units(ctx context.Context, tx *sqlx.Tx, sku string) (have, out int64, err error) {
	err = tx.QueryRowxContext(ctx, l.lq.lockUnits, sku).Scan(&have, &out)
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
// wrapping stockguard.ErrInvalidRequest (bad arguments, before any I/O; or
// qty plus the units out on open orders would pass stockguard.MaxQty:
// nothing changed), ErrContention (the row stayed busy), ErrUnavailable
// (nothing changed), ErrOutcomeUnknown (the COMMIT's reply was lost) or
// the context's error.
func (l *ledger) SetStock(ctx context.Context, sku string, qty int64) error {
	if err := l.check(ctx, strategy.ValidateSet(sku, qty)); err != nil {
		return err
	}
	return l.retrier.Do(ctx, func(ctx context.Context) error {
		return l.pinned(ctx, l.session, func(conn *sqlx.Conn) error {
			err := inTx(ctx, conn, nil, func(tx *sqlx.Tx) error {
				// The expired holds' order rows, then the stock rows of
				// their lines in SKU order, sku's among them: the lock
				// order.
				_, err := l.reclaimIn(ctx, tx, sku)
				switch {
				case sqlstate(err) == sqlstateUndefinedTable:
					// A stock table made before the ledger: no holds.
					return errOldTable
				case err != nil:
					return err
				}
				_, out, err := l.units(ctx, tx, sku)
				switch {
				case sqlstate(err) == sqlstateUndefinedColumn:
					// A stock table made before the ledger, or before
					// on_orders (CreateSchema adds it): no units out. The
					// failed statement aborted tx, so the write goes
					// without it.
					return errOldTable
				case errors.Is(err, stockguard.ErrUnknownSKU):
					// A new SKU: no units out.
				case err != nil:
					return err
				default:
					if err := room.Set(sku, qty, out); err != nil {
						return err
					}
					if err := l.noneExpired(ctx, tx, sku); err != nil {
						return err
					}
				}
				_, err = tx.ExecContext(ctx, l.q.setStock, sku, qty)
				return classify(ctx, err, unsent)
			})
			if errors.Is(err, errOldTable) {
				return l.store.SetStock(ctx, sku, qty)
			}
			return err
		})
	})
}

// errOldTable stops a transaction that found the stock table without its
// on_orders column, or without a ledger.
var errOldTable = errors.New("pglock: a stock table without on_orders")

// noneExpired checks, in tx, which has locked sku's row, that no hold of
// sku has passed its deadline since the reclaim before the lock. Such a
// hold's units are back, yet its reclaim waits for the row, and would add
// them on top of the level set: the attempt starts again, to reclaim it
// first. Reading what was committed, it also sees a reclaim that is
// waiting for the row as not done yet.
func (l *ledger) noneExpired(ctx context.Context, tx *sqlx.Tx, sku string) error {
	var expired bool
	if err := tx.QueryRowxContext(ctx, l.lq.hasExpired, sku).Scan(&expired); err != nil {
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
// ErrOrderMismatch (id was applied by Restock, which is no order), or one
// of the errors every method returns.
func (l *ledger) Order(ctx context.Context, id string) (stockguard.OrderInfo, error) {
	if err := l.check(ctx, strategy.ValidateID(id)); err != nil {
		return stockguard.OrderInfo{}, err
	}
	var info stockguard.OrderInfo
	err := l.retrier.Do(ctx, func(ctx context.Context) error {
		return l.pinned(ctx, l.session, func(conn *sqlx.Conn) error {
			rec, ok, err := l.read(ctx, conn, id)
			switch {
			case err != nil:
				return err
			case !ok:
				return unknownOrder(id)
			case rec.kind == kindRestock:
				return mismatch(id, rec.kind)
			case rec.state == stockguard.OrderHeld && rec.expired:
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
			}
			info = stockguard.OrderInfo{ID: id, State: rec.state, Lines: rec.lines}
			// A confirmed hold is taken and expires no more: no deadline.
			if rec.deadline.Valid && rec.state != stockguard.OrderTaken {
				info.Deadline = rec.deadline.Time
			}
			return nil
		})
	})
	return info, err
}

// Stock returns the units of sku left, counting those of expired holds,
// which it reclaims first. It returns an error wrapping
// stockguard.ErrUnknownSKU when sku was never stocked, ErrInvalidRequest,
// ErrUnavailable (the read failed) or the context's error.
func (l *ledger) Stock(ctx context.Context, sku string) (int64, error) {
	if err := l.check(ctx, strategy.ValidateSKU(sku)); err != nil {
		return 0, err
	}
	var qty int64
	err := l.retrier.Do(ctx, func(ctx context.Context) error {
		return l.pinned(ctx, l.session, func(conn *sqlx.Conn) error {
			var expired bool
			err := conn.QueryRowxContext(ctx, l.lq.level, sku).Scan(&qty, &expired)
			switch {
			case sqlstate(err) == sqlstateUndefinedTable:
				qty, err = l.level(ctx, conn, sku) // no ledger, no holds
				return err
			case errors.Is(err, sql.ErrNoRows):
				return unknownSKU(sku)
			case err != nil || !expired:
				return classify(ctx, err, unsent)
			}
			// Reclaim, and read the level in the same transaction: what it
			// reports counts every hold expired by then.
			return inTx(ctx, conn, nil, func(tx *sqlx.Tx) error {
				if _, err := l.reclaimIn(ctx, tx, sku); err != nil {
					return err
				}
				return classify(ctx, tx.QueryRowxContext(ctx, l.q.stock, sku).Scan(&qty), unsent)
			})
		})
	})
	return qty, err
}
