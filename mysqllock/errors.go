package mysqllock

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"

	"github.com/go-sql-driver/mysql"
	"github.com/stockguard/stockguard"
)

// ErrFenced is returned by FencedStore.WriteFenced when the row was already
// written under a newer lock token: the caller's lock expired and someone
// else has held it since. It satisfies errors.Is(err, stockguard.ErrContention);
// nothing was changed.
var ErrFenced = fmt.Errorf("mysqllock: write fenced off by a newer lock holder: %w", stockguard.ErrContention)

// Server error numbers this package tells apart (MySQL and MariaDB share them).
const (
	erServerShutdown   = 1053 // the server is shutting down
	erLockWaitTimeout  = 1205 // innodb_lock_wait_timeout ran out; MariaDB's NOWAIT too
	erLockDeadlock     = 1213 // InnoDB rolled the transaction back to break a cycle
	erQueryInterrupted = 1317 // KILL QUERY, or the server interrupting a statement
	erConnectionKilled = 1927 // MariaDB: KILL CONNECTION
	erLockNowait       = 3572 // MySQL 8: NOWAIT found the row busy
)

// stage is what a failed call may have done to the stock.
type stage int

const (
	// unsent: nothing the call sent can have changed the stock — reads,
	// GET_LOCK, session settings, and statements inside a transaction that
	// was never committed (the server rolls it back, also when the
	// connection dies).
	unsent stage = iota
	// sent: an autocommit write that may have reached the server; without
	// its reply nobody knows whether it was applied.
	sent
)

// classify maps an error of a statement at stage st to the contract:
//
//   - 1213 deadlock: the server rolled the statement or transaction back, so
//     it is retried (stockguard.Retry) within the strategy's policy;
//   - 1205 lock wait timeout, 3572 NOWAIT: stockguard.ErrContention;
//   - 1053, 1317, 1927 (shutdown, interrupted, killed) after a write was sent:
//     the statement may have finished before the interruption,
//     stockguard.ErrOutcomeUnknown; before: ErrContention;
//   - any other server error: the server refused the statement, so nothing
//     changed: stockguard.ErrContention, the server's error wrapped for
//     diagnosis;
//   - no server reply (mysql.ErrInvalidConn, I/O errors, timeouts, the
//     context ending mid-statement) after a write was sent:
//     stockguard.ErrOutcomeUnknown; before (or driver.ErrBadConn, which
//     database/sql drivers return only when nothing reached the server): the
//     context's error when it has ended, else ErrContention.
//
// The context's error is joined only when nothing was applied, so that an
// error satisfies exactly one of the contract errors.
func classify(ctx context.Context, err error, st stage) error {
	if err == nil {
		return nil
	}
	var me *mysql.MySQLError
	if errors.As(err, &me) {
		switch me.Number {
		case erLockDeadlock:
			return stockguard.Retry(fmt.Errorf("%w: deadlock: %w", stockguard.ErrContention, err))
		case erLockWaitTimeout, erLockNowait:
			return fmt.Errorf("%w: row busy: %w", stockguard.ErrContention, err)
		case erServerShutdown, erQueryInterrupted, erConnectionKilled:
			if st == sent {
				return fmt.Errorf("%w: interrupted after the write was sent: %w", stockguard.ErrOutcomeUnknown, err)
			}
		}
		return fmt.Errorf("%w: the server refused the request, nothing changed: %w", stockguard.ErrContention, err)
	}
	if st == unsent || errors.Is(err, driver.ErrBadConn) {
		if cerr := stockguard.Canceled(ctx); cerr != nil {
			return cerr
		}
		return fmt.Errorf("%w: connection failed before anything was applied: %w", stockguard.ErrContention, detach(err))
	}
	// When the context ended mid-statement the driver closed the socket, but
	// the server carries on with the statement.
	return fmt.Errorf("%w: no reply after the write was sent: %w", stockguard.ErrOutcomeUnknown, detach(err))
}

// commitError classifies the error of tx.Commit. database/sql reports a
// context that ended before COMMIT was sent as the context's error, and a
// transaction its context already rolled back as sql.ErrTxDone; a COMMIT
// that could not be written is driver.ErrBadConn. Any other failure leaves
// the outcome unknown: the server may have committed before the reply was
// lost, even when it reports an error.
func commitError(ctx context.Context, err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, sql.ErrTxDone) || isContextError(err) || errors.Is(err, driver.ErrBadConn) {
		return classify(ctx, err, unsent)
	}
	return fmt.Errorf("%w: COMMIT failed: %w", stockguard.ErrOutcomeUnknown, err)
}

func isContextError(err error) bool {
	return errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)
}

// detach returns err, or only its text when it is a context error: an error
// that reports something was (or may have been) applied must not also
// satisfy errors.Is(err, context.Canceled), which promises nothing was.
func detach(err error) error {
	if isContextError(err) {
		return errors.New(err.Error())
	}
	return err
}
