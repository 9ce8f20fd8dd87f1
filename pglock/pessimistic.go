package pglock

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/jmoiron/sqlx"
	"github.com/stockguard/stockguard"
	"github.com/stockguard/stockguard/strategy"
)

// Pessimistic decrements in a transaction that locks the row first:
//
//	BEGIN
//	SELECT qty FROM stock WHERE sku = $1 FOR UPDATE [NOWAIT | SKIP LOCKED]
//	-- check qty
//	UPDATE stock SET qty = qty - $1, version = version + 1 WHERE sku = $2
//	COMMIT
//
// With LockWait a busy row is awaited at most the lock timeout, which the
// server enforces (lock_timeout, 55P03): a caller that gives up does not
// leave a wait behind on the server. It is safe for concurrent use and
// with the package's other strategies on the same table.
type Pessimistic struct {
	store
	mode    LockMode
	session *sessionInit // lock_timeout, for LockWait; nil otherwise
	retrier *strategy.Retrier
}

var (
	_ stockguard.Inventory  = (*Pessimistic)(nil)
	_ strategy.RetryCounter = (*Pessimistic)(nil)
)

// NewPessimistic returns the SELECT … FOR UPDATE strategy over db's table
// (options read: WithTable, WithLockMode, WithLockTimeout, WithRetry).
// With LockWait each pooled connection it uses gets SET lock_timeout once;
// don't change that setting on the same pool.
func NewPessimistic(db *sqlx.DB, opts ...Option) (*Pessimistic, error) {
	o, err := build("NewPessimistic", db, readsPessimistic, opts)
	if err != nil {
		return nil, err
	}
	return newPessimistic(db, o), nil
}

// newPessimistic builds what NewPessimistic returns, from valid options.
func newPessimistic(db *sqlx.DB, o options) *Pessimistic {
	p := &Pessimistic{store: newStore(db, o), mode: o.mode,
		retrier: strategy.NewRetrier(o.retryPolicy(strategy.RetryPolicy{}))}
	if o.mode == LockWait {
		p.session = lockTimeoutSession(o.lockWait)
	}
	return p
}

// Retries returns how many times a transaction was tried again after a
// deadlock.
func (p *Pessimistic) Retries() int64 { return p.retrier.Retries() }

// Decrement takes qty units of sku, all or none. It returns nil or an error
// wrapping one of stockguard.ErrInsufficientStock, ErrUnknownSKU,
// ErrInvalidRequest, ErrContention (the row stayed busy past the lock
// timeout, NOWAIT or SKIP LOCKED found it busy, or deadlock retries ran
// out: nothing changed), ErrUnavailable (the server refused — a missing
// table, read-only — or the connection failed before COMMIT: nothing
// changed), ErrOutcomeUnknown (COMMIT was sent but its reply was lost), or
// the context's error (nothing changed).
func (p *Pessimistic) Decrement(ctx context.Context, sku string, qty int64) error {
	if err := p.check(ctx, strategy.Validate(sku, qty)); err != nil {
		return err
	}
	return p.retrier.Do(ctx, func(ctx context.Context) error {
		return p.pinned(ctx, p.session, func(conn *sqlx.Conn) error {
			err := inTx(ctx, conn, nil, func(tx *sqlx.Tx) error {
				var have int64
				err := tx.QueryRowxContext(ctx, p.q.lockRow, sku).Scan(&have)
				switch {
				case errors.Is(err, sql.ErrNoRows):
					return err // explained by missing, once rolled back
				case err != nil:
					return classify(ctx, err, unsent)
				case have < qty:
					return insufficient(sku, qty, have)
				}
				_, err = tx.ExecContext(ctx, p.q.takeHeld, qty, sku)
				return classify(ctx, err, unsent)
			})
			if errors.Is(err, sql.ErrNoRows) {
				return p.missing(ctx, conn, sku)
			}
			return err
		})
	})
}

// missing explains a locking read that found no row. Waiting or NOWAIT, a
// locking read sees the latest committed row, so the SKU is unknown. SKIP
// LOCKED also skips a row that is locked, so a plain read tells: no row
// means unknown (rows are never deleted); a row means it was busy.
func (p *Pessimistic) missing(ctx context.Context, conn *sqlx.Conn, sku string) error {
	if p.mode != LockSkipLocked {
		return unknownSKU(sku)
	}
	if _, err := p.level(ctx, conn, sku); err != nil {
		return err
	}
	return fmt.Errorf("%w: %q is locked by another transaction (SKIP LOCKED)", stockguard.ErrContention, sku)
}
