package pglock

import (
	"context"
	"database/sql"
	"errors"

	"github.com/jmoiron/sqlx"
	"github.com/stockguard/stockguard"
	"github.com/stockguard/stockguard/strategy"
)

// Serializable decrements in a SERIALIZABLE transaction — read, check,
// write — and retries it when the server reports a serialization failure
// (40001), at any statement or at COMMIT:
//
//	BEGIN ISOLATION LEVEL SERIALIZABLE
//	SELECT qty FROM stock WHERE sku = $1
//	UPDATE stock SET qty = $1, version = version + 1 WHERE sku = $2
//	COMMIT
//
// The code reads as if it ran alone; the server proves it did. It is what
// users reach for first, and on a hot row it is the slowest strategy: of
// the concurrent transactions on one row, one commits and the others roll
// back and start again. It is the strategy that
// carries over to engines that offer only SERIALIZABLE (CockroachDB).
type Serializable struct {
	store
	retrier *strategy.Retrier
}

var (
	_ stockguard.Inventory  = (*Serializable)(nil)
	_ strategy.RetryCounter = (*Serializable)(nil)
)

// NewSerializable returns the SERIALIZABLE strategy over db's table
// (options read: WithTable, WithRetry; default policy as NewOptimistic's).
func NewSerializable(db *sqlx.DB, opts ...Option) (*Serializable, error) {
	o, err := build("NewSerializable", db, readsAtomic, opts)
	if err != nil {
		return nil, err
	}
	return newSerializable(db, o), nil
}

// newSerializable builds what NewSerializable returns, from valid options.
func newSerializable(db *sqlx.DB, o options) *Serializable {
	return &Serializable{store: newStore(db, o), retrier: strategy.NewRetrier(o.retryPolicy(defaultCASPolicy))}
}

// Retries returns how many transactions were tried again after a
// serialization failure or a deadlock.
func (s *Serializable) Retries() int64 { return s.retrier.Retries() }

var serializable = &sql.TxOptions{Isolation: sql.LevelSerializable}

// Decrement takes qty units of sku, all or none. It returns as
// Pessimistic.Decrement does, ErrContention meaning that every attempt
// met a serialization failure.
func (s *Serializable) Decrement(ctx context.Context, sku string, qty int64) error {
	if err := s.check(ctx, strategy.Validate(sku, qty)); err != nil {
		return err
	}
	return s.retrier.Do(ctx, func(ctx context.Context) error {
		return s.pinned(ctx, nil, func(conn *sqlx.Conn) error {
			return inTx(ctx, conn, serializable, func(tx *sqlx.Tx) error {
				var have int64
				err := tx.QueryRowxContext(ctx, s.q.stock, sku).Scan(&have)
				switch {
				case errors.Is(err, sql.ErrNoRows):
					return unknownSKU(sku)
				case err != nil:
					return classify(ctx, err, unsent)
				case have < qty:
					return insufficient(sku, qty, have)
				}
				_, err = tx.ExecContext(ctx, s.q.setQty, have-qty, sku)
				return classify(ctx, err, unsent)
			})
		})
	})
}
