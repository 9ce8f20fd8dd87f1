package redisx

import (
	"context"
	"errors"
	"fmt"
	"net"

	"github.com/redis/go-redis/v9"
	"github.com/stockguard/stockguard"
)

// Effect says what a failed command could have done had it reached the
// server. Only a Write that may have been sent makes an outcome unknown.
type Effect bool

const (
	// Read commands (GET, WATCH) change nothing, so any failure of theirs
	// leaves the stock as it was.
	Read Effect = false
	// Write commands (EVALSHA of a decrement script, EXEC, SET) change data
	// when they reach the server. They must be sent with Once: go-redis
	// otherwise resends a command whose reply timed out, which both applies
	// it twice and can turn the second attempt's context error into a
	// misleading "not sent".
	Write Effect = true
)

// Classify maps an error of a go-redis call to the stockguard contract.
// ctx is the caller's context, effect what the command could have changed.
//
//   - nil and redis.Nil come back unchanged: a missing key is the caller's
//     business (usually ErrUnknownSKU).
//   - redis.TxFailedErr (a watched key changed, EXEC aborted, nothing
//     applied) wraps stockguard.ErrContention; optimistic strategies check
//     for it first and retry.
//   - Errors raised before the command left the client — pool timeout or
//     exhaustion, a closed client, a failed dial, the context ending while
//     waiting for a connection (see NotSent) — applied nothing: the context's
//     error when ctx has ended, else ErrContention (the contract's "nothing
//     changed, try again later"; Redis being unreachable is reported as the
//     caller giving up, with the cause kept in the message).
//   - A Redis error reply (redis.Error: WRONGTYPE, OOM, BUSY, READONLY,
//     CLUSTERDOWN, NOPERM, …) means the server answered and refused the
//     command: ErrContention wrapping the reply. This assumes the command had
//     no effect when it failed, which holds for a single command, a MULTI/EXEC
//     of one write, and a script that does every check that can fail before
//     its first write — all the commands stockguard sends.
//   - Anything else (an I/O error or timeout, EOF, a connection reset, or an
//     error of unknown origin) happened after the command may have been sent:
//     for a Read, nothing changed (the context's error if ctx has ended, else
//     ErrContention); for a Write, stockguard.ErrOutcomeUnknown.
//
// Every non-nil result other than redis.Nil satisfies stockguard.IsContract
// and matches exactly one contract sentinel.
func Classify(ctx context.Context, err error, effect Effect) error {
	var reply redis.Error
	switch {
	case err == nil, errors.Is(err, redis.Nil):
		return err
	case errors.Is(err, redis.TxFailedErr):
		return fmt.Errorf("%w: watched key changed: %w", stockguard.ErrContention, err)
	case NotSent(err):
		if cerr := stockguard.Canceled(ctx); cerr != nil {
			return cerr
		}
		return fmt.Errorf("%w: redis unreachable, nothing sent: %w", stockguard.ErrContention, cause(err))
	case errors.As(err, &reply):
		return fmt.Errorf("%w: redis refused the command: %w", stockguard.ErrContention, err)
	case effect == Read:
		if cerr := stockguard.Canceled(ctx); cerr != nil {
			return cerr
		}
		return fmt.Errorf("%w: redis read failed, nothing changed: %w", stockguard.ErrContention, cause(err))
	default:
		return fmt.Errorf("%w: redis failed after the command may have been sent: %w", stockguard.ErrOutcomeUnknown, cause(err))
	}
}

// NotSent reports whether err was raised before a command could leave the
// client. go-redis has no direct signal for that; what it does have: errors
// from its connection pool (ErrPoolTimeout, ErrPoolExhausted, ErrClosed) and
// from dialling (*net.OpError with Op "dial", even when wrapped in the dial
// timeout's context.DeadlineExceeded) come before any write, and a context
// error that is not an I/O error comes from waiting for a connection — I/O on
// an established connection fails with net errors, because go-redis turns
// deadlines into socket deadlines, never into context errors. (The one
// exception, a context ending during go-redis's own retry backoff after a
// failed send, cannot happen to commands sent with Once.)
func NotSent(err error) bool {
	if errors.Is(err, redis.ErrPoolTimeout) || errors.Is(err, redis.ErrPoolExhausted) || errors.Is(err, redis.ErrClosed) {
		return true
	}
	var op *net.OpError
	if errors.As(err, &op) {
		return op.Op == "dial"
	}
	return errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)
}

// cause returns err for wrapping with %w, except that a context error (a dial
// timeout, while the caller's own context is live) is flattened to text:
// wrapped, it would make errors.Is(result, context.DeadlineExceeded) claim
// the caller's context ended, and the result would match two sentinels.
func cause(err error) error {
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return errors.New(err.Error())
	}
	return err
}
