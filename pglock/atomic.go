package pglock

import (
	"context"
	"database/sql"
	"errors"

	"github.com/jmoiron/sqlx"
	"github.com/stockguard/stockguard"
	"github.com/stockguard/stockguard/strategy"
)

// Atomic decrements with one conditional statement,
//
//	UPDATE stock SET qty = qty - $1, version = version + 1 WHERE sku = $2 AND qty >= $1 RETURNING qty
//
// which checks and writes under the row lock the UPDATE takes anyway: one
// round trip, autocommit. Under READ COMMITTED an UPDATE that waited for
// the row re-checks qty >= $1 on the newest version of the row (not its
// snapshot's), so concurrent decrements queue on the row lock and never
// oversell. It is safe for concurrent use and with other instances, and
// with the other strategies of this package on the same table.
//
// Atomic also implements stockguard.Orders: each Take, Hold, Confirm,
// Return or Restock is one transaction over the stock table and the order
// ledger (see CreateSchema), which records the order and its lines with
// the stock they took; a repeated call is answered from the record.
type Atomic struct {
	ledger
}

var (
	_ stockguard.Inventory  = (*Atomic)(nil)
	_ stockguard.Orders     = (*Atomic)(nil)
	_ strategy.RetryCounter = (*Atomic)(nil)
)

// NewAtomic returns the conditional-UPDATE strategy over db's table
// (options read: WithTable, WithRetry). db is a database/sql
// pool with the pgx driver (sqlx.Open("pgx", dsn)); let it hold at least as
// many connections as there are concurrent callers (db.SetMaxOpenConns,
// db.SetMaxIdleConns), or requests queue for a connection and new ones are
// dialled per request.
//
// A context that ends while the UPDATE waits for a busy row makes pgx
// close the connection; the server notices and rolls the statement back
// only when it next touches the socket, so the request reports
// ErrOutcomeUnknown. Bound the server-side wait with lock_timeout or
// statement_timeout in the DSN (pgx sends them as run-time parameters):
// those end the statement on the server, with ErrContention.
func NewAtomic(db *sqlx.DB, opts ...Option) (*Atomic, error) {
	o, err := build("NewAtomic", db, readsAtomic, opts)
	if err != nil {
		return nil, err
	}
	return newAtomic(db, o), nil
}

// newAtomic builds what NewAtomic returns, from valid options.
func newAtomic(db *sqlx.DB, o options) *Atomic {
	return &Atomic{ledger: newLedger(db, o, nil)}
}

// Retries returns how many times a request was tried again: after a
// deadlock, or when the row changed between a refused UPDATE and the read
// that explains it.
func (a *Atomic) Retries() int64 { return a.retrier.Retries() }

// Decrement takes qty units of sku, all or none. It returns nil or an error
// wrapping one of stockguard.ErrInsufficientStock, ErrUnknownSKU,
// ErrInvalidRequest, ErrContention (retries exhausted or the row stayed
// busy: nothing changed), ErrUnavailable (the server refused — read-only,
// a missing table — or no connection: nothing changed), ErrOutcomeUnknown
// (the connection failed after the UPDATE was sent), or the context's
// error (nothing sent).
func (a *Atomic) Decrement(ctx context.Context, sku string, qty int64) error {
	if err := a.check(ctx, strategy.Validate(sku, qty)); err != nil {
		return err
	}
	return a.retrier.Do(ctx, func(ctx context.Context) error {
		// One autocommit statement needs no pinned connection: the pool
		// picks one, and database/sql tries another when pgx reports that
		// nothing was sent on a dead one.
		var left int64
		err := a.db.QueryRowContext(ctx, a.q.take, qty, sku).Scan(&left)
		if !errors.Is(err, sql.ErrNoRows) {
			return classify(ctx, err, sent)
		}
		// Nothing changed. A second read cannot tell why the UPDATE refused —
		// the row may have been created or re-stocked since — but what it
		// sees is itself a valid answer, taken at the moment of the read: no
		// row is an unknown SKU (rows are never deleted); too few units is
		// insufficient stock, once no expired hold has units to give back.
		// Only a row that now has enough stock contradicts the refusal, and
		// then the request, which changed nothing, is tried again.
		return a.pinned(ctx, nil, func(conn *sqlx.Conn) error {
			return a.short(ctx, conn, []stockguard.Line{{SKU: sku, Qty: qty}})
		})
	})
}
