package mysqllock

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"

	"github.com/go-sql-driver/mysql"
	"github.com/jmoiron/sqlx"
	"github.com/stockguard/stockguard"
)

// multiStatements finds out once whether the pool's connections send
// several statements, with parameters, in one round trip: the DSN's
// multiStatements=true and interpolateParams=true. Without them the server
// refuses the probe's two statements as a syntax error, and batches run
// statement by statement.
type multiStatements struct {
	state atomic.Int32 // 0 unknown, 1 yes, 2 no
}

func (m *multiStatements) check(ctx context.Context, conn *sqlx.Conn, eng Engine) (bool, error) {
	if eng == EngineTiDB {
		// Untested there (TiDB gates several statements per query behind
		// tidb_multi_statement_mode): statement by statement.
		return false, nil
	}
	switch m.state.Load() {
	case 1:
		return true, nil
	case 2:
		return false, nil
	}
	// The server decides, whatever the engine option says: TiDB answers the
	// probe but not the transaction's statements as MySQL does (every order
	// ended unknown there with WithEngine(EngineMySQL)).
	switch server, err := detectEngine(ctx, conn); {
	case err != nil:
		return false, err
	case server == EngineTiDB:
		m.state.Store(2)
		return false, nil
	}
	done, err := enter(ctx, phaseRead) // DO changes nothing
	if err != nil {
		return false, err
	}
	_, err = conn.ExecContext(ctx, "DO ?; DO ?", 1, 1)
	done()
	var me *mysql.MySQLError
	switch {
	case err == nil:
		m.state.Store(1)
		return true, nil
	case errors.As(err, &me):
		m.state.Store(2)
		return false, nil
	}
	return false, classify(ctx, err, unsent)
}

// placeMulti is placeAll's transaction in two round trips, for a pool
// that sends several statements at once (see multiStatements):
//
//	START TRANSACTION; [SET @…;] INSERT orders; [INSERT lines]
//	UPDATE stock …; SET @… = (an overflow unless every line was taken); COMMIT
//
// (the SET and the lines INSERT only for holds: a Take's lines are in its
// order row, see recordStmts). The first records the orders and locks
// their IDs; only once the server has answered it is seal called (see
// Batched.writeOrders), so a caller who is told ErrOutcomeUnknown has its
// ID locked until the outcome is known: a repeat's refusal, which needs a
// locking read of the ID, waits for it. The check fails with "BIGINT
// value is out of range" when the conditional UPDATE took fewer rows than
// there are lines — an unknown SKU or too few units — so COMMIT never
// runs; a duplicate ID fails its INSERT the same way. Either way the
// transaction is rolled back here and errShort or errDuplicate returned.
// The stock rows are locked only by the UPDATE, the last statement before
// COMMIT: a hot row is held for the UPDATE and the COMMIT alone, not for
// the round trips or the inserts before them.
func (l *ledger) placeMulti(ctx context.Context, conn *sqlx.Conn, orders []newOrder, lines []stockguard.Line, seal func() bool) error {
	r := l.recordStmts(orders)
	if err := openMulti(ctx, conn, strings.Join(r.stmts, "; "), r.allArgs(), nil); err != nil {
		return err
	}
	if seal != nil && !seal() {
		rollback(ctx, conn)
		return errLeft
	}
	takeQ, takeArgs := l.takeStmt(lines, true)
	return runMulti(ctx, conn, takeQ+"; "+rowCheck+"; COMMIT", append(takeArgs, len(lines)))
}

// rowCheck fails with "BIGINT value is out of range" (erOutOfRange) unless
// the statement before it changed as many rows as its argument says,
// whatever the sql_mode: the cheapest statement found that fails, rather
// than warns, on a condition (DO only warns; a subquery of two rows cost
// the server about twice as much).
const rowCheck = "SET @stockguard_taken = 9223372036854775807 + (ROW_COUNT() <> ?)"

// openMulti starts a transaction on conn and runs query — statements that
// record orders, then, if scan is not nil, a read whose rows it scans — in
// the same round trip. Nothing is applied before COMMIT, so it is a
// supervised read: a caller who leaves meanwhile is answered with its
// context's error, and no statement follows. On failure the transaction
// is rolled back: errDuplicate when an INSERT met a recorded ID, else the
// classified error.
func openMulti(ctx context.Context, conn *sqlx.Conn, query string, args []any, scan func(*sql.Rows) error) error {
	done, err := enter(ctx, phaseTx)
	if err != nil {
		return err
	}
	rows, err := conn.QueryContext(ctx, inline("START TRANSACTION; "+query, args))
	if err == nil {
		for err == nil && scan != nil && rows.Next() {
			err = scan(rows)
		}
		if err == nil {
			err = rows.Err()
		}
		if cerr := rows.Close(); err == nil {
			err = cerr
		}
	}
	done()
	if err == nil {
		return nil
	}
	rollback(ctx, conn)
	if isServerError(err, erDupEntry) {
		return errDuplicate
	}
	return classify(ctx, err, unsent)
}

// rollback ends the transaction open on conn; a connection that cannot
// roll back is discarded (database/sql closes it, and the server rolls
// back), so that it never goes back to the pool inside a transaction.
func rollback(ctx context.Context, conn *sqlx.Conn) {
	if _, err := conn.ExecContext(ctx, "ROLLBACK"); err != nil {
		conn.Raw(func(any) error { return driver.ErrBadConn })
	}
}

// runMulti sends query, a transaction's statements up to its COMMIT — the
// rest of one openMulti began, or a whole one — in one round trip:
// errShort when a rowCheck failed, errDuplicate when an INSERT met a
// recorded ID — rolled back, nothing changed — else the classified error.
func runMulti(ctx context.Context, conn *sqlx.Conn, query string, args []any) error {
	done, err := enter(ctx, phaseWrite)
	if err != nil {
		rollback(ctx, conn)
		return err
	}
	_, err = conn.ExecContext(ctx, inline(query, args))
	done()
	if errors.Is(err, mysql.ErrPktTooLarge) {
		rollback(ctx, conn) // nothing of query was sent
		return classify(ctx, err, unsent)
	}
	var me *mysql.MySQLError
	if err == nil || !errors.As(err, &me) {
		return classify(ctx, err, sent)
	}
	rollback(ctx, conn)
	switch me.Number {
	case erDupEntry:
		return errDuplicate
	case erOutOfRange:
		return errShort
	}
	if refusedBeforeCommit(me.Number) {
		return classify(ctx, err, unsent)
	}
	// Any other error may have come from COMMIT itself.
	return fmt.Errorf("%w: the orders' statements and COMMIT failed: %w", stockguard.ErrOutcomeUnknown, err)
}

// refusedBeforeCommit reports whether a transaction sent with its COMMIT
// failed with number having changed nothing: the server stops a
// multi-statement at the first statement that fails, and these refuse a
// statement before COMMIT — or, from COMMIT, refuse to commit: a deadlock
// or lock wait timeout; a missing column or table (a ledger that
// CreateSchema has not upgraded yet); a read-only or demoted server
// (read_only, a read-only transaction, super_read_only or
// innodb_read_only); a missing privilege; a full table; a statement
// beyond max_allowed_packet, refused before it was read.
func refusedBeforeCommit(number uint16) bool {
	switch number {
	case erLockDeadlock, erLockWaitTimeout, erBadField, erNoSuchTable,
		erOptionPreventsStatement, erReadOnlyTransaction, erReadOnlyMode, erTableAccessDenied, erTableFull,
		erNetPacketTooLarge:
		return true
	}
	return false
}

// The refusals of a server that cannot take writes, or of this user.
const (
	erTableFull               = 1114 // the table is full
	erNetPacketTooLarge       = 1153 // the statement is beyond max_allowed_packet
	erTableAccessDenied       = 1142 // the user lacks the privilege for the table
	erOptionPreventsStatement = 1290 // --read-only (or super_read_only) refuses writes
	erReadOnlyTransaction     = 1792 // a write in a READ ONLY transaction
	erReadOnlyMode            = 1836 // the server is in read-only mode
)

// erOutOfRange is "BIGINT value is out of range": rowCheck's failure.
const erOutOfRange = 1690
