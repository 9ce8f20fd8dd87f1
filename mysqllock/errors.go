package mysqllock

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/stockguard/stockguard"
	"github.com/stockguard/stockguard/strategy"
)

// Server error numbers this package tells apart (MySQL and MariaDB share
// them unless noted). Every other server error is a refusal: see classify.
const (
	erServerShutdown   = 1053 // the server is shutting down
	erLockWaitTimeout  = 1205 // innodb_lock_wait_timeout ran out; MariaDB's NOWAIT too
	erLockDeadlock     = 1213 // InnoDB rolled the transaction back to break a cycle
	erQueryInterrupted = 1317 // KILL QUERY, or the server interrupting a statement
	erConnectionKilled = 1927 // MariaDB: KILL CONNECTION
	erStatementTimeout = 1969 // MariaDB: max_statement_time ran out
	erQueryTimeout     = 3024 // MySQL: max_execution_time ran out
	erLockNowait       = 3572 // MySQL 8: NOWAIT found the row busy
	erUnknown          = 1105 // a server error with no number of its own; TiDB's storage errors among them
)

// TiDB's own error numbers (see EngineTiDB); MySQL and MariaDB do not use
// them.
const (
	erTiDBForUpdateCantRetry = 8002 // optimistic: a retried transaction read FOR UPDATE
	erTiDBStaleWriteConflict = 8005 // optimistic: a write conflict found by TiDB itself
	erTiDBTxnRetryable       = 8022 // the transaction failed in a way safe to retry
	erTiDBSchemaChanged      = 8028 // a DDL changed a table during the transaction
	erTiDBRunaway            = 8253 // a resource group's runaway-query rule ended the statement
	erTiDBPDTimeout          = 9001 // the placement driver did not answer
	erTiDBTiKVTimeout        = 9002 // a storage node did not answer
	erTiDBTiKVBusy           = 9003 // a storage node refused: too busy
	erTiDBResolveLockTimeout = 9004 // another transaction's lock could not be resolved in time
	erTiDBRegionUnavailable  = 9005 // a storage region has no leader
	erTiDBWriteConflict      = 9007 // optimistic: another transaction wrote the row since this one began
	erTiDBStoreLimit         = 9008 // a storage node's request limit
)

// rolledBack reports whether err is a TiDB error that says the whole
// transaction (or autocommit statement) was rolled back before anything of
// it was committed: a write conflict or a change under it, which the next
// attempt does not meet again.
func rolledBack(err error) bool {
	var me *mysql.MySQLError
	if !errors.As(err, &me) {
		return false
	}
	switch me.Number {
	case erTiDBWriteConflict, erTiDBStaleWriteConflict, erTiDBTxnRetryable, erTiDBSchemaChanged, erTiDBForUpdateCantRetry:
		return true
	case erUnknown:
		// A pessimistic statement that met a newer write at every one of
		// its attempts to lock (max-retry-count) has no number of its own.
		return strings.Contains(me.Message, tidbLockRetryLimit)
	}
	return false
}

// TiDB's messages, under number 1105, for a statement that gave up taking
// its locks: after max-retry-count write conflicts, and after
// innodb_lock_wait_timeout when write conflicts made it wait in several
// turns (a single wait that runs out is 1205).
const (
	tidbLockRetryLimit  = "pessimistic lock retry limit reached"
	tidbLockWaitTimeout = "lock wait timeout"
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

// classify maps an error of a statement at stage st to the contract. The
// one question is what the failure says about the server: busy (try again
// soon: ErrContention), unable to serve (ErrUnavailable), or silent after
// a write (ErrOutcomeUnknown).
//
//	error                                            unsent                 sent
//	1213 deadlock                                    retried (Retry), then ErrContention
//	1205 lock wait timeout, 3572 NOWAIT              ErrContention          ErrContention
//	1969, 3024 statement time limit                  ErrContention          ErrOutcomeUnknown
//	1053 shutdown, 1317 interrupted, 1927 killed     ErrUnavailable         ErrOutcomeUnknown
//	TiDB: 9007, 8005 write conflict, 8022 retryable, retried (Retry), then ErrContention
//	      8028 schema changed, 8002, 1105 lock
//	      retry limit (also at COMMIT)
//	TiDB: 9004 lock not resolved in time,            ErrContention          ErrContention
//	      1105 lock wait timeout
//	TiDB: 9001, 9002, 9005 no answer from storage,   ErrUnavailable         ErrOutcomeUnknown
//	      9003, 9008 storage busy, 8253 runaway,
//	      1105 unknown error
//	any other server error                           ErrUnavailable         ErrUnavailable
//	no reply: connection failed, refused, timed out  ErrUnavailable         ErrOutcomeUnknown
//	driver.ErrBadConn (nothing reached the server),
//	mysql.ErrPktTooLarge (beyond the DSN's
//	maxAllowedPacket: nothing sent)                  ErrUnavailable         ErrUnavailable
//	the caller's context ended or its deadline passed, nothing applied:
//	                                                 the context's error    ErrOutcomeUnknown
//
// Only the lock errors say "busy": another transaction holds what the
// statement needs, and it may let go in a moment. A statement time limit
// is counted with them, because what makes a statement of this package run
// that long is waiting for locks. Every other server error is the server
// refusing a statement this package built and validated — a missing table
// or database (1146, 1049, 1051, 1054, 1109), a read-only server or
// transaction (1290 with --read-only, 1792, 1836, 1223 under FLUSH TABLES
// WITH READ LOCK), access denied (1044, 1045, 1142, 1143, 1227), too many
// connections (1040, 1203), a full table or disk (1114, 1021): the server's
// state or configuration, which trying again at once does not change, so
// ErrUnavailable. A refused statement changed nothing (InnoDB undoes a
// failed statement), also when it was a write. A server that could not be
// reached, a connection that failed, and a server or an administrator
// ending the session (1053, 1317, 1927) before a write was sent are
// ErrUnavailable too; once a write was sent and no reply came, its outcome
// is unknown. The server's or driver's error is wrapped for diagnosis.
//
// TiDB adds its own numbers. Its optimistic transactions — autocommit
// statements unless the server is configured otherwise — find conflicts at
// commit and roll back whole: 9007 and its kin say nothing was applied and
// another attempt will meet a newer row, so they are retried like a
// deadlock, also when COMMIT reports them. 9004 is a lock left by another
// transaction, busy like 1205. Its storage errors (9001…9008) and 1105, the
// number TiDB gives errors without one of their own (a commit whose result
// it could not learn among them), may come after a write reached storage:
// once a write was sent they leave its outcome unknown.
//
// A context that ended is reported as the context's error only when
// nothing was applied, so that an error satisfies exactly one of the
// contract errors. Its deadline counts, not only ctx.Err(): a dial or read
// that timed out at the caller's deadline fails before the context's own
// timer fires, and must not be reported as an unreachable server.
func classify(ctx context.Context, err error, st stage) error {
	if err == nil {
		return nil
	}
	if rolledBack(err) {
		return strategy.Retry(fmt.Errorf("%w: write conflict, rolled back: %w", stockguard.ErrContention, err))
	}
	var me *mysql.MySQLError
	if errors.As(err, &me) {
		if me.Number == erUnknown && strings.Contains(me.Message, tidbLockWaitTimeout) {
			return fmt.Errorf("%w: row busy: %w", stockguard.ErrContention, err)
		}
		switch me.Number {
		case erLockDeadlock:
			return strategy.Retry(fmt.Errorf("%w: deadlock: %w", stockguard.ErrContention, err))
		case erLockWaitTimeout, erLockNowait, erTiDBResolveLockTimeout:
			return fmt.Errorf("%w: row busy: %w", stockguard.ErrContention, err)
		case erStatementTimeout, erQueryTimeout:
			if st == sent {
				return fmt.Errorf("%w: the write ran out of time after it was sent: %w", stockguard.ErrOutcomeUnknown, err)
			}
			return fmt.Errorf("%w: the statement ran out of time: %w", stockguard.ErrContention, err)
		case erServerShutdown, erQueryInterrupted, erConnectionKilled, erTiDBRunaway,
			erTiDBPDTimeout, erTiDBTiKVTimeout, erTiDBTiKVBusy, erTiDBRegionUnavailable, erTiDBStoreLimit, erUnknown:
			if st == sent {
				return fmt.Errorf("%w: interrupted after the write was sent: %w", stockguard.ErrOutcomeUnknown, err)
			}
			return fmt.Errorf("%w: the server ended the request, nothing changed: %w", stockguard.ErrUnavailable, err)
		}
		return fmt.Errorf("%w: the server refused the request, nothing changed: %w", stockguard.ErrUnavailable, err)
	}
	if errors.Is(err, mysql.ErrPktTooLarge) {
		// The driver refuses, before it writes anything, a statement beyond
		// its own maxAllowedPacket.
		return fmt.Errorf("%w: %w: %w", stockguard.ErrUnavailable, errTooLarge, err)
	}
	if st == unsent || errors.Is(err, driver.ErrBadConn) {
		if cerr := ended(ctx); cerr != nil {
			return cerr
		}
		return fmt.Errorf("%w: connection failed before anything was applied: %w", stockguard.ErrUnavailable, detach(err))
	}
	// When the context ended mid-statement the driver closed the socket, but
	// the server carries on with the statement.
	return fmt.Errorf("%w: no reply after the write was sent: %w", stockguard.ErrOutcomeUnknown, detach(err))
}

// errTooLarge marks a statement the driver did not send: it was beyond the
// DSN's maxAllowedPacket (see Batched.writeParts).
var errTooLarge = errors.New("mysqllock: a statement beyond the driver's maxAllowedPacket, not sent")

// commitError classifies the error of tx.Commit. database/sql reports a
// context that ended before COMMIT was sent as the context's error, and a
// transaction its context already rolled back as sql.ErrTxDone; a COMMIT
// that could not be written is driver.ErrBadConn. Any other failure leaves
// the outcome unknown: the server may have committed before the reply was
// lost, even when it reports an error — unless the error is TiDB's word that
// the transaction was rolled back (rolledBack).
func commitError(ctx context.Context, err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, sql.ErrTxDone) || isContextError(err) || errors.Is(err, driver.ErrBadConn) || rolledBack(err) {
		return classify(ctx, err, unsent)
	}
	return fmt.Errorf("%w: COMMIT failed: %w", stockguard.ErrOutcomeUnknown, err)
}

// ended returns the error of the caller's context behind ctx (see
// callerOf) once it has ended — or once its deadline has passed, which
// ctx.Err() reports only when the context's timer has fired, a moment
// later — else nil.
func ended(ctx context.Context) error {
	ctx = callerOf(ctx)
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

// detach returns err, or only its text when it is a context error: an error
// that reports something was (or may have been) applied must not also
// satisfy errors.Is(err, context.Canceled), which promises nothing was.
func detach(err error) error {
	if isContextError(err) {
		return errors.New(err.Error())
	}
	return err
}
