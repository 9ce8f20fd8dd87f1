package pglock

import (
	"context"
	"database/sql"
	"errors"
	"hash/fnv"

	"github.com/jmoiron/sqlx"
	"github.com/stockguard/stockguard"
	"github.com/stockguard/stockguard/strategy"
)

// AdvisoryLock serializes the decrements of one SKU on a transaction-scoped
// advisory lock, PostgreSQL's named lock, around a read-modify-write:
//
//	BEGIN
//	SELECT pg_advisory_xact_lock($1)   -- a 64-bit key hashed from table and SKU
//	SELECT qty FROM stock WHERE sku = $1
//	-- check qty
//	UPDATE stock SET qty = qty - $1, version = version + 1 WHERE sku = $2 AND qty >= $1
//	COMMIT                             -- releases the lock
//
// Unlike MySQL's GET_LOCK the lock belongs to the transaction: COMMIT,
// ROLLBACK or a dead session releases it, so no path can leak it. The wait
// is bounded by lock_timeout (WithLockTimeout). The UPDATE keeps its
// condition so that the package's other strategies, which do not take the
// lock, may share the table. Two SKUs whose keys collide (64-bit FNV-1a)
// merely share a lock.
type AdvisoryLock struct {
	store
	prefix  string // the table name, hashed before the SKU
	session *sessionInit
	retrier *strategy.Retrier
}

var (
	_ stockguard.Inventory  = (*AdvisoryLock)(nil)
	_ strategy.RetryCounter = (*AdvisoryLock)(nil)
)

// NewAdvisoryLock returns the advisory-lock strategy over db's table
// (options read: WithTable, WithLockTimeout, WithRetry). Each pooled
// connection it uses gets SET lock_timeout once; don't change that
// setting on the same pool.
func NewAdvisoryLock(db *sqlx.DB, opts ...Option) (*AdvisoryLock, error) {
	o, err := build("NewAdvisoryLock", db, readsLocking, opts)
	if err != nil {
		return nil, err
	}
	return newAdvisoryLock(db, o), nil
}

// newAdvisoryLock builds what NewAdvisoryLock returns, from valid options.
func newAdvisoryLock(db *sqlx.DB, o options) *AdvisoryLock {
	return &AdvisoryLock{store: newStore(db, o), prefix: o.table, session: lockTimeoutSession(o.lockWait),
		retrier: strategy.NewRetrier(o.retryPolicy(strategy.RetryPolicy{}))}
}

// Retries returns how many times a request was tried again: after a
// deadlock, or when a writer outside the lock changed the row.
func (a *AdvisoryLock) Retries() int64 { return a.retrier.Retries() }

// key is the advisory lock key of sku: FNV-1a over the table name, a NUL
// (which no identifier holds) and the SKU.
func (a *AdvisoryLock) key(sku string) int64 {
	h := fnv.New64a()
	h.Write([]byte(a.prefix))
	h.Write([]byte{0})
	h.Write([]byte(sku))
	return int64(h.Sum64())
}

// Decrement takes qty units of sku, all or none. It returns as
// Pessimistic.Decrement does, ErrContention meaning that the lock stayed
// busy past the lock timeout.
func (a *AdvisoryLock) Decrement(ctx context.Context, sku string, qty int64) error {
	if err := a.check(ctx, strategy.Validate(sku, qty)); err != nil {
		return err
	}
	return a.retrier.Do(ctx, func(ctx context.Context) error {
		return a.pinned(ctx, a.session, func(conn *sqlx.Conn) error {
			return inTx(ctx, conn, nil, func(tx *sqlx.Tx) error {
				if _, err := tx.ExecContext(ctx, "SELECT pg_advisory_xact_lock($1)", a.key(sku)); err != nil {
					return classify(ctx, err, unsent)
				}
				var have int64
				err := tx.QueryRowxContext(ctx, a.q.stock, sku).Scan(&have)
				switch {
				case errors.Is(err, sql.ErrNoRows):
					return unknownSKU(sku)
				case err != nil:
					return classify(ctx, err, unsent)
				case have < qty:
					return insufficient(sku, qty, have)
				}
				var left int64
				err = tx.QueryRowxContext(ctx, a.q.take, qty, sku).Scan(&left)
				if errors.Is(err, sql.ErrNoRows) {
					return strategy.Retry(errChanged) // a writer outside the lock took units
				}
				return classify(ctx, err, unsent)
			})
		})
	})
}
