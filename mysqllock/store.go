package mysqllock

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/jmoiron/sqlx"
	"github.com/stockguard/stockguard"
)

// store is what every strategy shares: the pool, the table's statements,
// and SetStock/Stock.
type store struct {
	db  *sqlx.DB
	q   queries
	err error // an invalid option, reported by every method
}

func newStore(db *sqlx.DB, o options) store {
	return store{db: db, q: newQueries(o.table, o.mode), err: o.err}
}

// SetStock creates sku with qty units, or overwrites its level; qty may be
// 0…stockguard.MaxQty. Overwriting bumps the row's version (so a
// concurrent optimistic decrement retries instead of writing over it) and
// keeps its fence (so a stale lock holder stays fenced off). It returns nil,
// or an error wrapping stockguard.ErrInvalidRequest, ErrContention (nothing
// changed), ErrOutcomeUnknown or the context's error.
func (s *store) SetStock(ctx context.Context, sku string, qty int64) error {
	if err := s.check(ctx, stockguard.ValidateSet(sku, qty)); err != nil {
		return err
	}
	conn, err := s.conn(ctx)
	if err != nil {
		return err
	}
	defer conn.Close()
	_, err = conn.ExecContext(ctx, s.q.setStock, sku, qty, qty)
	return classify(ctx, err, sent)
}

// Stock returns the units of sku left. It returns an error wrapping
// stockguard.ErrUnknownSKU when sku was never stocked, ErrInvalidRequest,
// ErrContention (the read failed) or the context's error.
func (s *store) Stock(ctx context.Context, sku string) (int64, error) {
	if err := s.check(ctx, stockguard.ValidateSKU(sku)); err != nil {
		return 0, err
	}
	conn, err := s.conn(ctx)
	if err != nil {
		return 0, err
	}
	defer conn.Close()
	return s.level(ctx, conn, sku)
}

// level reads sku's qty on conn: ErrUnknownSKU when the row is missing.
func (s *store) level(ctx context.Context, conn *sqlx.Conn, sku string) (int64, error) {
	var qty int64
	err := conn.QueryRowxContext(ctx, s.q.stock, sku).Scan(&qty)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, unknownSKU(sku)
	}
	return qty, classify(ctx, err, unsent)
}

// check admits a request before any I/O: it returns, in this order, the
// error of an invalid option, invalid (the request's validation error:
// stockguard.Validate, ValidateSet or ValidateSKU), and the context's error.
func (s *store) check(ctx context.Context, invalid error) error {
	if s.err != nil {
		return s.err
	}
	if invalid != nil {
		return invalid
	}
	return stockguard.Canceled(ctx)
}

// conn pins a pooled connection for one request, so that every statement
// of the request runs on one session and an error getting the connection —
// a context that ended while waiting for the pool — is known to come
// before anything was sent.
func (s *store) conn(ctx context.Context) (*sqlx.Conn, error) {
	conn, err := s.db.Connx(ctx)
	if err != nil {
		return nil, classify(ctx, err, unsent)
	}
	return conn, nil
}

// pinned runs fn on a connection of its own, after applying sess to it
// unless sess is nil.
func (s *store) pinned(ctx context.Context, sess *sessionInit, fn func(context.Context, *sqlx.Conn) error) error {
	conn, err := s.conn(ctx)
	if err != nil {
		return err
	}
	defer conn.Close()
	if sess != nil {
		if err := sess.apply(ctx, conn); err != nil {
			return err
		}
	}
	return fn(ctx, conn)
}

// inTx runs fn in a transaction on conn and commits it, or rolls it back
// and returns fn's error, which fn has classified. Until COMMIT is sent
// nothing can be applied: the server rolls back also when the connection
// dies.
func inTx(ctx context.Context, conn *sqlx.Conn, fn func(*sqlx.Tx) error) error {
	tx, err := conn.BeginTxx(ctx, nil)
	if err != nil {
		return classify(ctx, err, unsent)
	}
	if err := fn(tx); err != nil {
		tx.Rollback()
		return err
	}
	return commitError(ctx, tx.Commit())
}

func unknownSKU(sku string) error {
	return fmt.Errorf("%w: %q", stockguard.ErrUnknownSKU, sku)
}

func insufficient(sku string, want, have int64) error {
	return fmt.Errorf("%w: %q has %d, %d wanted", stockguard.ErrInsufficientStock, sku, have, want)
}
