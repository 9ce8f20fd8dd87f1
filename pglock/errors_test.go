package pglock

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"io"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stockguard/stockguard"
	"github.com/stockguard/stockguard/strategy"
)

// TestClassify maps every SQLSTATE and transport failure the package tells
// apart, unsent and sent, to exactly one contract error.
func TestClassify(t *testing.T) {
	pg := func(code string) error { return fmt.Errorf("wrapped: %w", &pgconn.PgError{Code: code, Message: "m"}) }
	ctxOK := context.Background()
	canceled, cancel := context.WithCancel(context.Background())
	cancel()
	tests := []struct {
		name         string
		ctx          context.Context
		err          error
		unsent, sent error
		retry        bool
	}{
		{"serialization", ctxOK, pg("40001"), stockguard.ErrContention, stockguard.ErrContention, true},
		{"deadlock", ctxOK, pg("40P01"), stockguard.ErrContention, stockguard.ErrContention, true},
		{"lock not available", ctxOK, pg("55P03"), stockguard.ErrContention, stockguard.ErrContention, false},
		{"statement_timeout", ctxOK, pg("57014"), stockguard.ErrContention, stockguard.ErrContention, false},
		{"canceled by the caller", canceled, pg("57014"), context.Canceled, context.Canceled, false},
		{"admin shutdown", ctxOK, pg("57P01"), stockguard.ErrUnavailable, stockguard.ErrOutcomeUnknown, false},
		{"too many connections", ctxOK, pg("53300"), stockguard.ErrUnavailable, stockguard.ErrOutcomeUnknown, false},
		{"connection exception", ctxOK, pg("08006"), stockguard.ErrUnavailable, stockguard.ErrOutcomeUnknown, false},
		{"read-only", ctxOK, pg("25006"), stockguard.ErrUnavailable, stockguard.ErrUnavailable, false},
		{"missing table", ctxOK, pg("42P01"), stockguard.ErrUnavailable, stockguard.ErrUnavailable, false},
		{"other refusal", ctxOK, pg("42501"), stockguard.ErrUnavailable, stockguard.ErrUnavailable, false},
		{"no reply", ctxOK, io.ErrUnexpectedEOF, stockguard.ErrUnavailable, stockguard.ErrOutcomeUnknown, false},
		{"bad conn", ctxOK, driver.ErrBadConn, stockguard.ErrUnavailable, stockguard.ErrUnavailable, false},
		{"caller left, nothing sent", canceled, context.Canceled, context.Canceled, stockguard.ErrOutcomeUnknown, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, c := range []struct {
				st   stage
				want error
			}{{unsent, tt.unsent}, {sent, tt.sent}} {
				got := classify(tt.ctx, tt.err, c.st)
				if c.want == context.Canceled {
					ctxOnly(t, got, context.Canceled)
					continue
				}
				contractOne(t, got, c.want)
				// A Retrier tries again exactly the errors marked for it.
				r := strategy.NewRetrier(strategy.RetryPolicy{MaxAttempts: 2, BaseDelay: time.Microsecond, MaxDelay: time.Microsecond})
				r.Do(ctxOK, func(context.Context) error { return got })
				if retried := r.Retries() == 1; retried != tt.retry {
					t.Errorf("stage %d: %v retried=%v, want %v", c.st, got, retried, tt.retry)
				}
			}
		})
	}
}

// A COMMIT whose reply was lost leaves the outcome unknown; one refused by
// the server (a serialization failure found at commit) rolled back; one
// whose context ended before it was sent applied nothing.
func TestCommitError(t *testing.T) {
	ctx := context.Background()
	contractOne(t, commitError(ctx, io.ErrUnexpectedEOF), stockguard.ErrOutcomeUnknown)
	contractOne(t, commitError(ctx, &pgconn.PgError{Code: "40001"}), stockguard.ErrContention)
	contractOne(t, commitError(ctx, &pgconn.PgError{Code: "57P01"}), stockguard.ErrOutcomeUnknown)
	dl, cancel := context.WithDeadline(ctx, time.Now().Add(-time.Second))
	defer cancel()
	ctxOnly(t, commitError(dl, context.DeadlineExceeded), context.DeadlineExceeded)
}

// ctxOnly fails t unless err is the context error want and no contract
// error of stockguard's.
func ctxOnly(t *testing.T, err, want error) {
	t.Helper()
	if !errors.Is(err, want) {
		t.Fatalf("%v, want %v", err, want)
	}
	for _, e := range strategy.ContractErrors() {
		if e != want && errors.Is(err, e) {
			t.Fatalf("%v also matches %v", err, e)
		}
	}
}

// A COMMIT answered by a PANIC (a WAL fsync failure: 58030, or 53100 out
// of disk space) or a FATAL may have reached the WAL, which the server
// replays after its restart: the outcome is unknown. So is an autocommit
// write answered so. Only an ERROR at COMMIT is a rollback.
func TestCommitError_panicOrFatalIsOutcomeUnknown(t *testing.T) {
	ctx := context.Background()
	for _, pe := range []*pgconn.PgError{
		{Severity: "PANIC", SeverityUnlocalized: "PANIC", Code: "58030", Message: "could not fsync file"},
		{Severity: "PANIC", SeverityUnlocalized: "PANIC", Code: "53100", Message: "could not write to file: No space left on device"},
		{Severity: "PANIK", SeverityUnlocalized: "PANIC", Code: "XX000"}, // a localized severity
		{Severity: "FATAL", Code: "XX000"},
	} {
		err := fmt.Errorf("wrapped: %w", pe)
		contractOne(t, commitError(ctx, err), stockguard.ErrOutcomeUnknown)
		contractOne(t, classify(ctx, err, sent), stockguard.ErrOutcomeUnknown)
		contractOne(t, classify(ctx, err, unsent), stockguard.ErrUnavailable)
	}
	refused := &pgconn.PgError{Severity: "ERROR", SeverityUnlocalized: "ERROR", Code: "23505"}
	contractOne(t, commitError(ctx, refused), stockguard.ErrUnavailable)
}

// pgx answers a COMMIT cancelled in flight with the bare context.Canceled
// database/sql returns when the context ended before COMMIT was sent: the
// outcome is unknown (inTx answers a context that ended before Commit
// itself). A bare context.DeadlineExceeded comes only from database/sql
// (pgx wraps a deadline in a timeout error): nothing was sent.
func TestCommitError_canceledIsOutcomeUnknown(t *testing.T) {
	canceled, cancel := context.WithCancel(context.Background())
	cancel()
	contractOne(t, commitError(canceled, context.Canceled), stockguard.ErrOutcomeUnknown)
	ctxOnly(t, commitError(canceled, sql.ErrTxDone), context.Canceled)
}
