package mysqllock

import (
	"context"
	"database/sql"
	"errors"

	"github.com/jmoiron/sqlx"
	"github.com/stockguard/stockguard/internal/errtext"
	"github.com/stockguard/stockguard/strategy"
)

// store is what every strategy shares: the pool, the table's statements,
// and SetStock/Stock.
type store struct {
	db     *sqlx.DB
	q      queries
	engine *engineProbe
	// refused, when set, is every method's answer before any I/O: the
	// strategy cannot run on the engine it was told (NewNamedLock on TiDB).
	refused error
}

func newStore(db *sqlx.DB, o options) store {
	return store{db: db, q: newQueries(o.table, o.mode), engine: newEngineProbe(o.engine, nil)}
}

// SetStock creates sku with qty units, or overwrites its level; qty may be
// 0…stockguard.MaxQty. Overwriting bumps the row's version (so a
// concurrent optimistic decrement retries instead of writing over it) and
// keeps its fence (so a stale lock holder stays fenced off). It returns nil,
// or an error wrapping stockguard.ErrInvalidRequest, ErrUnavailable
// (nothing changed), ErrOutcomeUnknown or the context's error.
func (s *store) SetStock(ctx context.Context, sku string, qty int64) error {
	if err := s.check(ctx, strategy.ValidateSet(sku, qty)); err != nil {
		return err
	}
	return s.pinned(ctx, nil, func(ctx context.Context, conn *sqlx.Conn) error {
		_, err := exec(ctx, conn, s.q.setStock, sku, qty, qty)
		return classify(ctx, err, sent)
	})
}

// Stock returns the units of sku left. It returns an error wrapping
// stockguard.ErrUnknownSKU when sku was never stocked, ErrInvalidRequest,
// ErrUnavailable (the read failed) or the context's error.
func (s *store) Stock(ctx context.Context, sku string) (int64, error) {
	if err := s.check(ctx, strategy.ValidateSKU(sku)); err != nil {
		return 0, err
	}
	var qty int64
	err := s.pinned(ctx, nil, func(ctx context.Context, conn *sqlx.Conn) error {
		var err error
		qty, err = s.level(ctx, conn, sku)
		return err
	})
	return qty, err
}

// level reads sku's qty on conn: ErrUnknownSKU when the row is missing.
func (s *store) level(ctx context.Context, conn *sqlx.Conn, sku string) (int64, error) {
	var qty int64
	err := get(ctx, conn, s.q.stock, []any{sku}, &qty)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, unknownSKU(sku)
	}
	return qty, classify(ctx, err, unsent)
}

// check admits a request before any I/O: it returns, in this order, the
// store's refusal of its engine, invalid (the request's validation error:
// strategy.Validate, ValidateSet or ValidateSKU), and the context's error.
func (s *store) check(ctx context.Context, invalid error) error {
	if s.refused != nil {
		return s.refused
	}
	if invalid != nil {
		return invalid
	}
	return strategy.Canceled(ctx)
}

// conn pins a pooled connection for one request, so that every statement
// of the request runs on one session and an error getting the connection —
// a context that ended while waiting for the pool — is known to come
// before anything was sent. Getting it is supervised (see supervise): a
// caller whose deadline passes while a connection is dialled is answered
// at once, and the dial goes on to give the pool its connection.
func (s *store) conn(ctx context.Context) (*sqlx.Conn, error) {
	if err := ended(ctx); err != nil {
		return nil, err
	}
	if ctx.Done() == nil {
		return s.connOn(ctx)
	}
	var conn *sqlx.Conn
	err := supervise(ctx, func(sctx context.Context) error {
		c, err := s.connOn(sctx)
		if err != nil {
			return err
		}
		if handOver(sctx) {
			conn = c
			return nil
		}
		c.Close()
		return ended(ctx)
	})
	return conn, err
}

// connOn gets a connection under ctx, as a supervised read, prepared for
// the server's engine (see Engine).
func (s *store) connOn(ctx context.Context) (*sqlx.Conn, error) {
	done, err := enter(ctx, phaseRead)
	if err != nil {
		return nil, err
	}
	defer done()
	conn, err := s.db.Connx(ctx)
	if err != nil {
		return nil, classify(ctx, err, unsent)
	}
	if err := s.engine.prepare(ctx, conn); err != nil {
		conn.Close()
		return nil, err
	}
	return conn, nil
}

// pinned runs fn on a connection of its own, after applying sess to it
// unless sess is nil. A caller with a context that can end is supervised
// (see supervise): fn runs on a goroutine of its own under a context
// detached from the caller's, so that a deadline passing mid-statement does
// not cost the pool the connection.
func (s *store) pinned(ctx context.Context, sess *sessionInit, fn func(context.Context, *sqlx.Conn) error) error {
	if err := ended(ctx); err != nil {
		return err
	}
	if ctx.Done() == nil {
		return s.pinnedOn(ctx, sess, fn)
	}
	return supervise(ctx, func(sctx context.Context) error { return s.pinnedOn(sctx, sess, fn) })
}

// pinnedTracked is pinned, and also returns a channel closed when fn's
// work has really ended: pinned returns early to a caller who left, while
// a write runs on (see supervise).
func (s *store) pinnedTracked(ctx context.Context, sess *sessionInit, fn func(context.Context, *sqlx.Conn) error) (<-chan struct{}, error) {
	fin := make(chan struct{})
	if err := ended(ctx); err != nil {
		close(fin)
		return fin, err
	}
	if ctx.Done() == nil {
		defer close(fin)
		return fin, s.pinnedOn(ctx, sess, fn)
	}
	return fin, supervise(ctx, func(sctx context.Context) error {
		defer close(fin)
		return s.pinnedOn(sctx, sess, fn)
	})
}

// pinnedInPlace is pinned for a request that nobody waits on once ctx
// ends: a drainer's batch (combine.Batch.Queued), whose context ends only
// after every member was answered. fn runs on the calling goroutine, not
// one of its own: there is no one to answer early, so ctx's end needs no
// goroutine hand-off per request. It is handled as supervise handles it —
// no statement is sent after it, and one in flight finishes on its
// connection, ended the driver's way after detachedGrace — under a context
// detached from ctx.
func (s *store) pinnedInPlace(ctx context.Context, sess *sessionInit, fn func(context.Context, *sqlx.Conn) error) error {
	if err := ended(ctx); err != nil {
		return err
	}
	base, cancel := context.WithCancel(context.WithoutCancel(ctx))
	defer cancel()
	r := &supervision{caller: ctx, cancel: cancel}
	stop := context.AfterFunc(ctx, func() { r.abandon() })
	defer stop()
	return s.pinnedOn(context.WithValue(base, requestKey{}, r), sess, fn)
}

func (s *store) pinnedOn(ctx context.Context, sess *sessionInit, fn func(context.Context, *sqlx.Conn) error) error {
	conn, err := s.connOn(ctx)
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
// dies. So for a supervised request BEGIN and fn are one supervised read,
// and COMMIT a supervised write.
func inTx(ctx context.Context, conn *sqlx.Conn, fn func(*sqlx.Tx) error) error {
	return inTxOpts(ctx, conn, nil, fn)
}

// readCommitted makes every read of a transaction see what was committed
// when it ran, not the snapshot of the transaction's first read: a sum
// read under a row lock is then as current as the row.
var readCommitted = &sql.TxOptions{Isolation: sql.LevelReadCommitted}

// inTxOpts is inTx with the transaction's options.
func inTxOpts(ctx context.Context, conn *sqlx.Conn, opts *sql.TxOptions, fn func(*sqlx.Tx) error) error {
	done, err := enter(ctx, phaseTx)
	if err != nil {
		return err
	}
	tx, err := conn.BeginTxx(ctx, opts)
	if err != nil {
		done()
		return classify(ctx, err, unsent)
	}
	if err := fn(tx); err != nil {
		done()
		tx.Rollback()
		return err
	}
	done()
	if done, err = enter(ctx, phaseWrite); err != nil {
		tx.Rollback()
		return err
	}
	defer done()
	return commitError(ctx, tx.Commit())
}

// exec sends query, a write, on conn (a connection or a transaction) as a
// supervised write: a caller that leaves while it is in flight is answered
// stockguard.ErrOutcomeUnknown, and the statement finishes on its
// connection. Every autocommit write of a supervised request must be sent
// through it: the supervisor answers a caller who leaves during a read or
// a transaction with the context's error, which is right only while no
// write was sent.
func exec(ctx context.Context, conn sqlx.ExecerContext, query string, args ...any) (sql.Result, error) {
	done, err := enter(ctx, phaseWrite)
	if err != nil {
		return nil, err
	}
	defer done()
	return execBound(ctx, conn, query, args...)
}

// get runs query, a read of one row, on q (a connection or a transaction)
// and scans the row into dest, as a supervised read.
func get(ctx context.Context, q sqlx.QueryerContext, query string, args []any, dest ...any) error {
	done, err := enter(ctx, phaseRead)
	if err != nil {
		return err
	}
	defer done()
	return rowBound(ctx, q, query, args...).Scan(dest...)
}

// sel runs query, a read, on q and scans every row into dest (a pointer to
// a slice), as a supervised read.
func sel(ctx context.Context, q sqlx.QueryerContext, dest any, query string, args ...any) error {
	done, err := enter(ctx, phaseRead)
	if err != nil {
		return err
	}
	defer done()
	return selectBound(ctx, q, dest, query, args...)
}

func unknownSKU(sku string) error {
	return errtext.UnknownSKU(sku)
}

func insufficient(sku string, want, have int64) error {
	return errtext.Insufficient(sku, have, want)
}
