package mysqllock

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"io"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/stockguard/stockguard"
)

func TestClassify(t *testing.T) {
	live := context.Background()
	dead, cancel := context.WithCancel(context.Background())
	cancel()
	server := func(n uint16) error { return fmt.Errorf("exec: %w", &mysql.MySQLError{Number: n, Message: "x"}) }
	retry := errors.New("retry") // stands for stockguard.Retry
	for _, c := range []struct {
		name string
		ctx  context.Context
		err  error
		st   stage
		want error
	}{
		{"deadlock", live, server(1213), sent, retry},
		{"deadlock unsent", live, server(1213), unsent, retry},
		{"lock wait timeout", live, server(1205), unsent, stockguard.ErrContention},
		{"nowait mysql", live, server(3572), unsent, stockguard.ErrContention},
		{"killed after write", live, server(1927), sent, stockguard.ErrOutcomeUnknown},
		{"interrupted after write", live, server(1317), sent, stockguard.ErrOutcomeUnknown},
		{"shutdown after write", live, server(1053), sent, stockguard.ErrOutcomeUnknown},
		{"killed before write", live, server(1927), unsent, stockguard.ErrContention},
		{"refused", live, server(1146), sent, stockguard.ErrContention},
		{"invalid conn after write", live, mysql.ErrInvalidConn, sent, stockguard.ErrOutcomeUnknown},
		{"eof after write", live, io.ErrUnexpectedEOF, sent, stockguard.ErrOutcomeUnknown},
		{"invalid conn before write", live, mysql.ErrInvalidConn, unsent, stockguard.ErrContention},
		{"bad conn: never sent", live, driver.ErrBadConn, sent, stockguard.ErrContention},
		{"canceled mid-write", dead, context.Canceled, sent, stockguard.ErrOutcomeUnknown},
		{"canceled mid-read", dead, context.Canceled, unsent, context.Canceled},
		{"canceled, conn failed before", dead, mysql.ErrInvalidConn, unsent, context.Canceled},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := classify(c.ctx, c.err, c.st)
			if c.want == retry {
				calls := 0
				err := stockguard.NewRetrier(stockguard.RetryPolicy{MaxAttempts: 2, BaseDelay: time.Microsecond}).Do(live,
					func(context.Context) error { calls++; return got })
				if calls != 2 || !errors.Is(err, stockguard.ErrContention) {
					t.Fatalf("%v: %d calls, then %v; want a retry, then ErrContention", got, calls, err)
				}
				return
			}
			contractOne(t, got, c.want)
		})
	}
	if err := classify(live, nil, sent); err != nil {
		t.Errorf("nil: %v", err)
	}
}

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
		{"COMMIT not written", live, driver.ErrBadConn, stockguard.ErrContention},
		{"connection lost", live, mysql.ErrInvalidConn, stockguard.ErrOutcomeUnknown},
		{"server error", live, &mysql.MySQLError{Number: 1180}, stockguard.ErrOutcomeUnknown},
		{"lost while the context ends", dead, io.ErrUnexpectedEOF, stockguard.ErrOutcomeUnknown},
	} {
		t.Run(c.name, func(t *testing.T) { contractOne(t, commitError(c.ctx, c.err), c.want) })
	}
	if err := commitError(live, nil); err != nil {
		t.Errorf("nil: %v", err)
	}
}
