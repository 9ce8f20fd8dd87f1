package pglock

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stockguard/stockguard"
	"github.com/stockguard/stockguard/internal/errtext"
	"github.com/stockguard/stockguard/strategy"
)

// SQLSTATEs this package tells apart. Every other server error is a
// refusal: see classify.
const (
	sqlstateSerialization   = "40001" // serialization_failure: SERIALIZABLE found a conflict
	sqlstateDeadlock        = "40P01" // deadlock_detected: the server broke a cycle
	sqlstateLockUnavailable = "55P03" // lock_not_available: NOWAIT, or lock_timeout ran out
	sqlstateQueryCanceled   = "57014" // query_canceled: a cancel request, or statement_timeout
	sqlstateUniqueViolation = "23505" // unique_violation: an order ID recorded already
	sqlstateUndefinedTable  = "42P01" // undefined_table: no ledger (a table from before it)
	sqlstateUndefinedColumn = "42703" // undefined_column: no on_orders (a stock table from before it)
	sqlstateReadOnly        = "25006" // read_only_sql_transaction
	sqlstateTooManyConns    = "53300" // too_many_connections
)

// lostSession reports whether code says the session ended or could not
// begin: class 08 (connection exception), 57P01 admin_shutdown
// (pg_terminate_backend, a fast shutdown), 57P02 crash_shutdown, 57P03
// cannot_connect_now (starting up, recovering), 53300
// too_many_connections.
func lostSession(code string) bool {
	return strings.HasPrefix(code, "08") || code == "57P01" || code == "57P02" || code == "57P03" || code == sqlstateTooManyConns
}

// sessionEnded reports whether err is a server error that ended the
// session or the server: lostSession's codes, or any error of severity
// FATAL or PANIC. A statement sent before it may have been applied.
func sessionEnded(err error) bool {
	var pe *pgconn.PgError
	if !errors.As(err, &pe) {
		return false
	}
	severity := pe.SeverityUnlocalized
	if severity == "" {
		severity = pe.Severity
	}
	return lostSession(pe.Code) || severity == "FATAL" || severity == "PANIC"
}

func sqlstate(err error) string {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		return pe.Code
	}
	return ""
}

// stage is what a failed call may have done to the stock.
type stage int

const (
	// unsent: nothing the call sent can have changed the stock — reads,
	// session settings, and statements inside a transaction that was never
	// committed (the server rolls it back, also when the session dies).
	unsent stage = iota
	// sent: an autocommit write that may have reached the server; without
	// its reply nobody knows whether it was applied.
	sent
)

// classify maps an error of a statement at stage st to the contract, in
// one place for every strategy:
//
//	SQLSTATE                                          unsent                 sent
//	40001 serialization, 40P01 deadlock               retried (Retry), then ErrContention
//	55P03 lock_not_available (NOWAIT, lock_timeout)   ErrContention          ErrContention
//	57014 query_canceled, the caller's context ended  the context's error    the context's error
//	57014 query_canceled otherwise (statement_timeout) ErrContention         ErrContention
//	08xxx, 57P01 admin_shutdown (pg_terminate_backend),
//	57P02, 57P03, 53300 too_many_connections,
//	any FATAL or PANIC (58030 a failed WAL fsync)     ErrUnavailable         ErrOutcomeUnknown
//	25006 read-only, 42P01 missing table, any other   ErrUnavailable         ErrUnavailable
//	no reply: connection failed, refused, timed out   ErrUnavailable         ErrOutcomeUnknown
//	nothing sent (pgconn.SafeToRetry, ErrBadConn)     ErrUnavailable         ErrUnavailable
//	the caller's context ended, nothing sent:         the context's error    ErrOutcomeUnknown
//
// A server error reply means the statement failed, and a failed statement
// changed nothing (also an autocommit write: it is its own transaction,
// rolled back) — except a session or server that was ended (class 08,
// 57P0x, a FATAL or PANIC): it may come after a COMMIT the server made,
// so once a write was sent its outcome is unknown. 57014 is a statement
// the server stopped: either the caller's context ended and pgx sent a
// cancel request, or
// statement_timeout ran out — what makes a statement of this package run
// that long is waiting for locks, so it is counted as busy. Lock errors say
// "busy": try again soon. Every other server error is the server refusing
// a statement this package built and validated — a missing table, a
// read-only server or transaction, permissions, a full disk — which trying
// again at once does not change: ErrUnavailable.
//
// A context that ended is reported as the context's error only when
// nothing was applied, so that an error satisfies exactly one of the
// contract errors.
func classify(ctx context.Context, err error, st stage) error {
	if err == nil {
		return nil
	}
	if code := sqlstate(err); code != "" {
		switch {
		case code == sqlstateSerialization:
			return strategy.Retry(fmt.Errorf("%w: serialization failure: %w", stockguard.ErrContention, err))
		case code == sqlstateDeadlock:
			return strategy.Retry(fmt.Errorf("%w: deadlock: %w", stockguard.ErrContention, err))
		case code == sqlstateLockUnavailable:
			return fmt.Errorf("%w: lock busy: %w", stockguard.ErrContention, err)
		case code == sqlstateQueryCanceled:
			if cerr := ended(ctx); cerr != nil {
				return cerr
			}
			return fmt.Errorf("%w: the statement ran out of time: %w", stockguard.ErrContention, err)
		case sessionEnded(err):
			if st == sent {
				return fmt.Errorf("%w: the session ended after the write was sent: %w", stockguard.ErrOutcomeUnknown, err)
			}
			return fmt.Errorf("%w: the server ended the session, nothing changed: %w", stockguard.ErrUnavailable, err)
		}
		return fmt.Errorf("%w: the server refused the request, nothing changed: %w", stockguard.ErrUnavailable, err)
	}
	if st == unsent || pgconn.SafeToRetry(err) || errors.Is(err, driver.ErrBadConn) {
		if cerr := ended(ctx); cerr != nil {
			return cerr
		}
		return fmt.Errorf("%w: connection failed before anything was applied: %w", stockguard.ErrUnavailable, detach(err))
	}
	return fmt.Errorf("%w: no reply after the write was sent: %w", stockguard.ErrOutcomeUnknown, detach(err))
}

// commitError classifies the error of a COMMIT: tx.Commit's, or the
// reply to a COMMIT pgx sent in a batch. A server error reply of severity
// ERROR (a serialization failure found at commit, a deferred constraint)
// means the transaction rolled back; a FATAL or PANIC one, or a lost
// session, may come after the commit record reached the WAL, which the
// server keeps, also when it replays the WAL after a PANIC's restart (a WAL
// fsync failure: 58030, 53100). database/sql answers sql.ErrTxDone when the
// transaction was rolled back before COMMIT was sent (its context ended),
// and returns the context's bare error when the context ended before
// COMMIT was sent; pgx returns the same bare context.Canceled when the
// context is cancelled while COMMIT is in flight, and a deadline then as
// a timeout that wraps context.DeadlineExceeded. So a bare
// context.DeadlineExceeded means COMMIT was not sent, a bare
// context.Canceled may mean either: inTx answers a context that ended
// before it called Commit itself, and one cancelled during Commit leaves
// the outcome unknown. Any other failure leaves the outcome unknown, also
// one pgx calls safe to retry: the fault suite's cut lost a unit when such
// COMMITs were counted as unsent.
func commitError(ctx context.Context, err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, sql.ErrTxDone) || err == context.DeadlineExceeded:
		return classify(ctx, err, unsent)
	case sqlstate(err) != "" && !sessionEnded(err):
		return classify(ctx, err, unsent)
	}
	return fmt.Errorf("%w: COMMIT failed: %w", stockguard.ErrOutcomeUnknown, detach(err))
}

// ended returns the caller's context error once it has ended — or once
// its deadline has passed, which ctx.Err() reports only when the context's
// timer has fired, a moment later — else nil.
func ended(ctx context.Context) error {
	if err := strategy.Canceled(ctx); err != nil {
		return err
	}
	if dl, ok := ctx.Deadline(); ok && !time.Now().Before(dl) {
		return context.DeadlineExceeded
	}
	return nil
}

func isContextError(err error) bool {
	return errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)
}

// detach returns err, or only its text when it is a context error: an
// error that reports something was (or may have been) applied must not
// also satisfy errors.Is(err, context.Canceled), which promises nothing
// was.
func detach(err error) error {
	if isContextError(err) {
		return errors.New(err.Error())
	}
	return err
}

func unknownSKU(sku string) error {
	return errtext.UnknownSKU(sku)
}

func insufficient(sku string, want, have int64) error {
	return errtext.Insufficient(sku, have, want)
}
