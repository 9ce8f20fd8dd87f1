package mysqllock

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
//	SELECT qty FROM stock WHERE sku = ? FOR UPDATE [NOWAIT | SKIP LOCKED]
//	-- check qty in Go
//	UPDATE stock SET qty = qty - ?, version = version + 1 WHERE sku = ?
//	COMMIT
//
// Concurrent buyers of one SKU queue on the row lock, which is held for two
// round trips — slower than NewAtomic, but the pattern for when the check
// needs more than one comparison. It is safe for concurrent use and with
// other instances, and with the other strategies of this package on the
// same table.
type Pessimistic struct {
	store
	mode    LockMode
	session *sessionInit // LockWait only: the lock-wait timeout
	retrier *strategy.Retrier
}

var (
	_ stockguard.Inventory  = (*Pessimistic)(nil)
	_ strategy.RetryCounter = (*Pessimistic)(nil)
)

// NewPessimistic returns the SELECT … FOR UPDATE strategy over db's table
// (options read: WithTable, WithLockMode, WithLockWaitTimeout, WithRetry,
// WithEngine). On TiDB, LockSkipLocked is refused at first use: every
// method returns an error wrapping stockguard.ErrUnavailable.
//
// In LockWait mode each pooled connection it uses gets
// SET SESSION innodb_lock_wait_timeout once (WithLockWaitTimeout); don't
// change that variable on the same pool. See NewAtomic for the DSN
// settings that matter.
func NewPessimistic(db *sqlx.DB, opts ...Option) (*Pessimistic, error) {
	o, err := build("NewPessimistic", db, readsPessimistic, opts)
	if err != nil {
		return nil, err
	}
	return newPessimistic(db, o), nil
}

// newPessimistic builds what NewPessimistic returns, from valid options.
func newPessimistic(db *sqlx.DB, o options) *Pessimistic {
	p := &Pessimistic{
		store:   newStore(db, o),
		mode:    o.mode,
		retrier: strategy.NewRetrier(o.retryPolicy(strategy.RetryPolicy{})),
	}
	if o.mode == LockWait {
		p.session = lockWaitSession(o.lockWait)
	}
	if o.mode == LockSkipLocked {
		p.engine.supports = func(e Engine) error {
			if e == EngineTiDB {
				// Measured: TiDB answers FOR UPDATE SKIP LOCKED at once with
				// a row another transaction holds, unlocked — the check
				// would run on a level that may be gone by the UPDATE.
				return errors.New("TiDB does not support FOR UPDATE SKIP LOCKED (it returns a locked row without locking it): use LockWait or LockNoWait")
			}
			return nil
		}
	}
	return p
}

// Retries returns how many times a transaction was tried again after a
// deadlock.
func (p *Pessimistic) Retries() int64 { return p.retrier.Retries() }

// Decrement takes qty units of sku, all or none. It returns nil or an error
// wrapping one of stockguard.ErrInsufficientStock, ErrUnknownSKU,
// ErrInvalidRequest, ErrContention (the row stayed busy past the lock-wait
// timeout, NOWAIT or SKIP LOCKED found it busy, or deadlock retries ran
// out: nothing changed), ErrUnavailable (the server refused — a missing
// table, read-only — or the connection failed before COMMIT: nothing
// changed), ErrOutcomeUnknown (COMMIT was sent but its reply was lost), or the
// context's error (nothing changed; a context that ends while the row lock
// is awaited ends the wait at once).
func (p *Pessimistic) Decrement(ctx context.Context, sku string, qty int64) error {
	if err := p.check(ctx, strategy.Validate(sku, qty)); err != nil {
		return err
	}
	return p.retrier.Do(ctx, func(ctx context.Context) error {
		return p.pinned(ctx, p.session, func(ctx context.Context, conn *sqlx.Conn) error {
			return p.take(ctx, conn, sku, qty)
		})
	})
}

func (p *Pessimistic) take(ctx context.Context, conn *sqlx.Conn, sku string, qty int64) error {
	err := inTx(ctx, conn, func(tx *sqlx.Tx) error {
		var have int64
		err := get(ctx, tx, p.q.lockRow, []any{sku}, &have)
		switch {
		case errors.Is(err, sql.ErrNoRows):
			return err // explained by missing, once rolled back
		case err != nil:
			return classify(ctx, err, unsent)
		case have < qty:
			return insufficient(sku, qty, have)
		}
		_, err = exec(ctx, tx, p.q.takeHeld, qty, sku)
		return classify(ctx, err, unsent)
	})
	if errors.Is(err, sql.ErrNoRows) {
		return p.missing(ctx, conn, sku)
	}
	return err
}

// missing explains a locking read that found no row. Waiting or NOWAIT, a
// locking read sees the latest committed row, so the SKU is unknown. SKIP
// LOCKED also skips a row that is locked, so a plain read tells: no row
// means unknown (rows are never deleted); a row means it was busy, or has
// been created since — either way the caller may try again.
func (p *Pessimistic) missing(ctx context.Context, conn *sqlx.Conn, sku string) error {
	if p.mode != LockSkipLocked {
		return unknownSKU(sku)
	}
	if _, err := p.level(ctx, conn, sku); err != nil {
		return err
	}
	return fmt.Errorf("%w: %q is locked by another transaction (SKIP LOCKED)", stockguard.ErrContention, sku)
}
