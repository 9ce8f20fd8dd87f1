package mysqllock

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/stockguard/stockguard"
	"github.com/stockguard/stockguard/strategy"
)

func TestClassify(t *testing.T) {
	live := context.Background()
	dead, cancel := context.WithCancel(context.Background())
	cancel()
	// A deadline that has passed, on a context whose timer has not fired
	// yet: ctx.Err() is still nil.
	passed, stop := context.WithDeadline(context.Background(), time.Now().Add(-time.Nanosecond))
	stop()
	passedNoErr := deadlineOnly{time.Now().Add(-time.Millisecond)}
	server := func(n uint16) error { return fmt.Errorf("exec: %w", &mysql.MySQLError{Number: n, Message: "x"}) }
	dialRefused := &net.OpError{Op: "dial", Net: "tcp", Err: errors.New("connect: connection refused")}
	dialTimeout := &net.OpError{Op: "dial", Net: "tcp", Err: os.ErrDeadlineExceeded}
	retry := errors.New("retry") // stands for strategy.Retry
	type row struct {
		name string
		ctx  context.Context
		err  error
		st   stage
		want error
	}
	rows := []row{
		{"deadlock", live, server(1213), sent, retry},
		{"deadlock unsent", live, server(1213), unsent, retry},
		{"lock wait timeout", live, server(1205), unsent, stockguard.ErrContention},
		{"lock wait timeout on a write", live, server(1205), sent, stockguard.ErrContention},
		{"nowait mysql", live, server(3572), unsent, stockguard.ErrContention},
		{"statement time limit mariadb", live, server(1969), unsent, stockguard.ErrContention},
		{"statement time limit mysql", live, server(3024), unsent, stockguard.ErrContention},
		{"statement time limit after write", live, server(1969), sent, stockguard.ErrOutcomeUnknown},
		{"killed after write", live, server(1927), sent, stockguard.ErrOutcomeUnknown},
		{"interrupted after write", live, server(1317), sent, stockguard.ErrOutcomeUnknown},
		{"shutdown after write", live, server(1053), sent, stockguard.ErrOutcomeUnknown},
		{"killed before write", live, server(1927), unsent, stockguard.ErrUnavailable},
		{"interrupted before write", live, server(1317), unsent, stockguard.ErrUnavailable},
		{"shutdown before write", live, server(1053), unsent, stockguard.ErrUnavailable},
		{"unknown server error", live, server(9999), unsent, stockguard.ErrUnavailable},
		{"invalid conn after write", live, mysql.ErrInvalidConn, sent, stockguard.ErrOutcomeUnknown},
		{"eof after write", live, io.ErrUnexpectedEOF, sent, stockguard.ErrOutcomeUnknown},
		{"invalid conn before write", live, mysql.ErrInvalidConn, unsent, stockguard.ErrUnavailable},
		{"bad conn: never sent", live, driver.ErrBadConn, sent, stockguard.ErrUnavailable},
		{"dial refused", live, dialRefused, unsent, stockguard.ErrUnavailable},
		{"dial timed out, ctx live", live, dialTimeout, unsent, stockguard.ErrUnavailable},
		{"dial timed out at the caller's deadline", passed, dialTimeout, unsent, context.DeadlineExceeded},
		{"dial timed out, deadline passed, timer not fired", passedNoErr, dialTimeout, unsent, context.DeadlineExceeded},
		{"bad conn, deadline passed", passedNoErr, driver.ErrBadConn, sent, context.DeadlineExceeded},
		{"no reply after write, deadline passed", passedNoErr, io.ErrUnexpectedEOF, sent, stockguard.ErrOutcomeUnknown},
		{"canceled mid-write", dead, context.Canceled, sent, stockguard.ErrOutcomeUnknown},
		{"canceled mid-read", dead, context.Canceled, unsent, context.Canceled},
		{"canceled, conn failed before", dead, mysql.ErrInvalidConn, unsent, context.Canceled},
		{"refused, ctx ended", dead, server(1146), unsent, stockguard.ErrUnavailable},
	}
	// Every server refusal that is neither busy nor an interruption means
	// the server cannot serve: before and after a write was sent.
	for _, n := range []uint16{
		1146, 1049, 1051, 1054, 1109, // missing table, database, column
		1290, 1792, 1836, 1223, // read-only server or transaction, global read lock
		1044, 1045, 1142, 1143, 1227, // access denied
		1040, 1203, // too many connections
		1114, 1021, // table or disk full
		4031, // MariaDB: disconnected for inactivity
	} {
		for _, st := range []stage{unsent, sent} {
			rows = append(rows, row{fmt.Sprintf("refused %d stage %d", n, st), live, server(n), st, stockguard.ErrUnavailable})
		}
	}
	for _, c := range rows {
		t.Run(c.name, func(t *testing.T) {
			got := classify(c.ctx, c.err, c.st)
			if c.want == retry {
				calls := 0
				err := strategy.NewRetrier(strategy.RetryPolicy{MaxAttempts: 2, BaseDelay: time.Microsecond}).Do(live,
					func(context.Context) error { calls++; return got })
				if calls != 2 || !errors.Is(err, stockguard.ErrContention) {
					t.Fatalf("%v: %d calls, then %v; want a retry, then ErrContention", got, calls, err)
				}
				return
			}
			contractOne(t, got, c.want)
			var me *mysql.MySQLError
			if errors.As(c.err, &me) && !errors.As(got, &me) {
				t.Errorf("%v does not wrap the server's error", got)
			}
		})
	}
	if err := classify(live, nil, sent); err != nil {
		t.Errorf("nil: %v", err)
	}
}

// deadlineOnly is a context whose deadline has passed but whose Err is
// still nil, as a context's is between its deadline and its timer firing.
type deadlineOnly struct{ dl time.Time }

func (d deadlineOnly) Deadline() (time.Time, bool) { return d.dl, true }
func (deadlineOnly) Done() <-chan struct{}         { return nil }
func (deadlineOnly) Err() error                    { return nil }
func (deadlineOnly) Value(any) any                 { return nil }

func TestCommitError(t *testing.T) {
	live := context.Background()
	dead, cancel := context.WithCancel(context.Background())
	cancel()
	for _, c := range []struct {
		name string
		ctx  context.Context
		err  error
		want error
	}{
		{"context ended before COMMIT", dead, context.Canceled, context.Canceled},
		{"rolled back by its context", dead, sql.ErrTxDone, context.Canceled},
		{"COMMIT not written", live, driver.ErrBadConn, stockguard.ErrUnavailable},
		{"connection lost", live, mysql.ErrInvalidConn, stockguard.ErrOutcomeUnknown},
		{"server error", live, &mysql.MySQLError{Number: 1180}, stockguard.ErrOutcomeUnknown},
		{"read-only at COMMIT", live, &mysql.MySQLError{Number: 1290}, stockguard.ErrOutcomeUnknown},
		{"lost while the context ends", dead, io.ErrUnexpectedEOF, stockguard.ErrOutcomeUnknown},
	} {
		t.Run(c.name, func(t *testing.T) { contractOne(t, commitError(c.ctx, c.err), c.want) })
	}
	if err := commitError(live, nil); err != nil {
		t.Errorf("nil: %v", err)
	}
}
