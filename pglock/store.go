package pglock

import (
	"context"
	"database/sql"
	"errors"

	"github.com/jmoiron/sqlx"
	"github.com/stockguard/stockguard/strategy"
)

// store is what every strategy shares: the pool, the table's statements,
// and SetStock/Stock.
type store struct {
	db  *sqlx.DB
	q   queries
	enc *encodingCheck
}

func newStore(db *sqlx.DB, o options) store {
	return store{db: db, q: newQueries(o.table, o.mode), enc: &encodingCheck{}}
}

// SetStock creates sku with qty units, or overwrites its level; qty may be
// 0…stockguard.MaxQty. Overwriting bumps the row's version (so a
// concurrent optimistic decrement retries instead of writing over it). It
// returns nil, or an error wrapping stockguard.ErrInvalidRequest,
// ErrUnavailable (nothing changed), ErrOutcomeUnknown or the context's
// error.
func (s *store) SetStock(ctx context.Context, sku string, qty int64) error {
	if err := s.check(ctx, strategy.ValidateSet(sku, qty)); err != nil {
		return err
	}
	_, err := s.db.ExecContext(ctx, s.q.setStock, sku, qty)
	return classify(ctx, err, sent)
}

// Stock returns the units of sku left. It returns an error wrapping
// stockguard.ErrUnknownSKU when sku was never stocked, ErrInvalidRequest,
// ErrUnavailable (the read failed) or the context's error.
func (s *store) Stock(ctx context.Context, sku string) (int64, error) {
	if err := s.check(ctx, strategy.ValidateSKU(sku)); err != nil {
		return 0, err
	}
	return s.level(ctx, s.db, sku)
}

// level reads sku's qty on q: ErrUnknownSKU when the row is missing.
func (s *store) level(ctx context.Context, q sqlx.QueryerContext, sku string) (int64, error) {
	var qty int64
	err := q.QueryRowxContext(ctx, s.q.stock, sku).Scan(&qty)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, unknownSKU(sku)
	}
	return qty, classify(ctx, err, unsent)
}

// check admits a request: it returns, in this order and before any I/O,
// invalid (the request's validation error) and the context's error, then
// — on a store's first request — the encoding check's (see encodingCheck).
func (s *store) check(ctx context.Context, invalid error) error {
	if invalid != nil {
		return invalid
	}
	if err := strategy.Canceled(ctx); err != nil {
		return err
	}
	return s.enc.verify(ctx, s.db)
}

// pinned runs fn on a connection of its own, after applying sess to it
// unless sess is nil, so that every statement of a request runs on one
// session and an error getting the connection is known to come before
// anything was sent.
func (s *store) pinned(ctx context.Context, sess *sessionInit, fn func(*sqlx.Conn) error) error {
	if err := ended(ctx); err != nil {
		return err
	}
	conn, err := s.db.Connx(ctx)
	if err != nil {
		return classify(ctx, err, unsent)
	}
	defer conn.Close()
	if sess != nil {
		if err := sess.apply(ctx, conn); err != nil {
			return err
		}
	}
	return fn(conn)
}

// inTx runs fn in a transaction (opts may be nil) on conn and commits it,
// or rolls it back and returns fn's error, which fn has classified. Until
// COMMIT is sent nothing can be applied: the server rolls back also when
// the session dies. A context that has ended before Commit is called ends
// the call with its error; one that ends during Commit leaves the outcome
// unknown (see commitError).
func inTx(ctx context.Context, conn *sqlx.Conn, opts *sql.TxOptions, fn func(*sqlx.Tx) error) error {
	tx, err := conn.BeginTxx(ctx, opts)
	if err != nil {
		return classify(ctx, err, unsent)
	}
	if err := fn(tx); err != nil {
		tx.Rollback()
		return err
	}
	if err := ended(ctx); err != nil {
		tx.Rollback()
		return err
	}
	return commitError(ctx, tx.Commit())
}
