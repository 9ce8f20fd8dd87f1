package pglock

import (
	"context"
	"database/sql"
	"errors"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/stockguard/stockguard"
	"github.com/stockguard/stockguard/strategy"
)

// Optimistic decrements by compare-and-swap on the row's version: read qty
// and version, check, then
//
//	UPDATE stock SET qty = $1, version = version + 1 WHERE sku = $2 AND version = $3
//
// and retry with backoff when the version moved. Two autocommit
// statements, no lock held between them. It is safe for concurrent use and
// with the package's other strategies on the same table.
type Optimistic struct {
	store
	retrier *strategy.Retrier
}

var (
	_ stockguard.Inventory  = (*Optimistic)(nil)
	_ strategy.RetryCounter = (*Optimistic)(nil)
)

// defaultCASPolicy is NewOptimistic's and NewSerializable's retry policy
// unless WithRetry sets one: a hot row makes most attempts conflict, so
// they get many tries and adaptive backoff (see strategy.RetryPolicy).
var defaultCASPolicy = strategy.RetryPolicy{
	MaxAttempts: 100,
	BaseDelay:   time.Millisecond,
	MaxDelay:    100 * time.Millisecond,
	Adaptive:    true,
}

// NewOptimistic returns the version-CAS strategy over db's table (options
// read: WithTable, WithRetry; default policy: 100 attempts, adaptive
// backoff from 1ms to 100ms).
func NewOptimistic(db *sqlx.DB, opts ...Option) (*Optimistic, error) {
	o, err := build("NewOptimistic", db, readsAtomic, opts)
	if err != nil {
		return nil, err
	}
	return newOptimistic(db, o), nil
}

// newOptimistic builds what NewOptimistic returns, from valid options.
func newOptimistic(db *sqlx.DB, o options) *Optimistic {
	return &Optimistic{store: newStore(db, o), retrier: strategy.NewRetrier(o.retryPolicy(defaultCASPolicy))}
}

// Retries returns how many times a request was tried again after a
// version conflict or a deadlock.
func (o *Optimistic) Retries() int64 { return o.retrier.Retries() }

var errConflict = errors.New("pglock: version changed between read and write")

// Decrement takes qty units of sku, all or none. It returns nil or an error
// wrapping one of stockguard.ErrInsufficientStock, ErrUnknownSKU,
// ErrInvalidRequest, ErrContention (every attempt met a conflict: nothing
// changed), ErrUnavailable (the server refused, or no connection: nothing
// changed), ErrOutcomeUnknown (the connection failed after the UPDATE was
// sent), or the context's error (nothing changed).
func (o *Optimistic) Decrement(ctx context.Context, sku string, qty int64) error {
	if err := o.check(ctx, strategy.Validate(sku, qty)); err != nil {
		return err
	}
	return o.retrier.Do(ctx, func(ctx context.Context) error {
		var have, version int64
		err := o.db.QueryRowContext(ctx, o.q.read, sku).Scan(&have, &version)
		switch {
		case errors.Is(err, sql.ErrNoRows):
			return unknownSKU(sku)
		case err != nil:
			return classify(ctx, err, unsent)
		case have < qty:
			return insufficient(sku, qty, have)
		}
		res, err := o.db.ExecContext(ctx, o.q.cas, have-qty, sku, version)
		if err != nil {
			return classify(ctx, err, sent)
		}
		// Rows are never deleted: no match means the version moved.
		n, err := res.RowsAffected()
		switch {
		case err != nil:
			return classify(ctx, err, sent)
		case n == 0:
			return strategy.Retry(errConflict)
		}
		return nil
	})
}
