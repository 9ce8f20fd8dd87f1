package mysqllock

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/stockguard/stockguard"
	"github.com/stockguard/stockguard/strategy"
)

// TestClassify_tidb: TiDB's own error numbers, and 1105, before and after a
// write was sent and at COMMIT.
func TestClassify_tidb(t *testing.T) {
	live := context.Background()
	server := func(n uint16) error { return fmt.Errorf("exec: %w", &mysql.MySQLError{Number: n, Message: "x"}) }
	retry := errors.New("retry") // stands for strategy.Retry
	type row struct {
		n      uint16
		unsent error
		sent   error
		commit error
	}
	for _, c := range []row{
		{9007, retry, retry, retry}, // write conflict
		{8005, retry, retry, retry}, // write conflict found by TiDB
		{8022, retry, retry, retry}, // retryable
		{8028, retry, retry, retry}, // schema changed
		{8002, retry, retry, retry}, // FOR UPDATE cannot retry
		{9004, stockguard.ErrContention, stockguard.ErrContention, stockguard.ErrOutcomeUnknown},
		{9001, stockguard.ErrUnavailable, stockguard.ErrOutcomeUnknown, stockguard.ErrOutcomeUnknown},
		{9002, stockguard.ErrUnavailable, stockguard.ErrOutcomeUnknown, stockguard.ErrOutcomeUnknown},
		{9003, stockguard.ErrUnavailable, stockguard.ErrOutcomeUnknown, stockguard.ErrOutcomeUnknown},
		{9005, stockguard.ErrUnavailable, stockguard.ErrOutcomeUnknown, stockguard.ErrOutcomeUnknown},
		{9008, stockguard.ErrUnavailable, stockguard.ErrOutcomeUnknown, stockguard.ErrOutcomeUnknown},
		{8253, stockguard.ErrUnavailable, stockguard.ErrOutcomeUnknown, stockguard.ErrOutcomeUnknown},
		{1105, stockguard.ErrUnavailable, stockguard.ErrOutcomeUnknown, stockguard.ErrOutcomeUnknown},
		{8229, stockguard.ErrUnavailable, stockguard.ErrUnavailable, stockguard.ErrOutcomeUnknown}, // pessimistic locks expired
		{0, retry, retry, retry}, // 1105 pessimistic lock retry limit reached
		{1, stockguard.ErrContention, stockguard.ErrContention, stockguard.ErrOutcomeUnknown}, // 1105 lock wait timeout
	} {
		err := server(c.n)
		switch c.n {
		case 0:
			err = &mysql.MySQLError{Number: 1105, Message: tidbLockRetryLimit}
		case 1:
			err = &mysql.MySQLError{Number: 1105, Message: tidbLockWaitTimeout}
		}
		for _, k := range []struct {
			name string
			got  error
			want error
		}{
			{"unsent", classify(live, err, unsent), c.unsent},
			{"sent", classify(live, err, sent), c.sent},
			{"commit", commitError(live, err), c.commit},
		} {
			t.Run(fmt.Sprintf("%d/%s", c.n, k.name), func(t *testing.T) {
				if k.want == retry {
					calls := 0
					err := strategy.NewRetrier(strategy.RetryPolicy{MaxAttempts: 2, BaseDelay: time.Microsecond}).Do(live,
						func(context.Context) error { calls++; return k.got })
					if calls != 2 || !errors.Is(err, stockguard.ErrContention) {
						t.Fatalf("%v: %d calls, then %v; want a retry, then ErrContention", k.got, calls, err)
					}
					return
				}
				contractOne(t, k.got, k.want)
			})
		}
	}
}
