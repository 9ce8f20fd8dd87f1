package redisx

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stockguard/stockguard"
	"github.com/stockguard/stockguard/strategy"
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
// The one question is what the failure says about Redis: busy (try again
// soon: ErrContention), unable to serve (ErrUnavailable), or silent after a
// write (ErrOutcomeUnknown).
//
//	error                                              Read                   Write
//	nil, redis.Nil                                     unchanged              unchanged
//	*AckError (applied, too few replicas confirmed)    ErrUnavailable         ErrOutcomeUnknown
//	ErrUnavailable of Acked (refused before sending)   as it is               as it is
//	redis.TxFailedErr (a watched key changed)          ErrContention          ErrContention
//	pool timeout or exhausted (all connections busy)   ErrContention          ErrContention
//	reply BUSY (a script runs), TRYAGAIN (resharding)  ErrContention          ErrContention
//	any other error reply                              ErrUnavailable         ErrUnavailable
//	dial failed, client closed (nothing sent)          ErrUnavailable         ErrUnavailable
//	I/O error, timeout, EOF, unknown origin            ErrUnavailable         ErrOutcomeUnknown
//	the caller's context ended or its deadline passed, nothing applied:
//	                                                   the context's error    (as above)
//
// Only TxFailedErr, BUSY, TRYAGAIN and a pool with every connection in use
// say "busy": the next attempt may well succeed. Every other error reply
// is Redis refusing a command this package built and validated because of
// its state or configuration — LOADING (a restart reading its data),
// READONLY (a replica), MASTERDOWN, CLUSTERDOWN, OOM (maxmemory),
// MISCONF, NOREPLICAS, NOPERM/NOAUTH, an unknown command, a key of the
// wrong type — which trying again at once does not change: ErrUnavailable.
// A refused command had no effect; this holds for a single command, a
// MULTI/EXEC of one write, and a script that does every check that can
// fail before its first write (Redis refuses OOM and READONLY at a
// script's first write, not after it) — all the commands stockguard
// sends. A Redis that cannot be reached, or a connection that failed
// before a reply, is ErrUnavailable too, unless a write may have been sent
// (ErrOutcomeUnknown). Errors raised before the command left the client
// are told apart by NotSent. The cause is kept in the message (wrapped
// when it is no context error).
//
// A caller's context that ended is reported as its error only when nothing
// was applied. Its deadline counts, not only ctx.Err(): a dial that timed
// out at the caller's deadline fails before the context's timer fires,
// and must not be reported as an unreachable Redis.
//
// Every non-nil result other than redis.Nil satisfies strategy.IsContract
// and matches exactly one contract sentinel.
func Classify(ctx context.Context, err error, effect Effect) error {
	var reply redis.Error
	switch {
	case err == nil, errors.Is(err, redis.Nil):
		return err
	case NotAcked(err) && effect == Read:
		// A read through Acked (a script that may give due holds back)
		// whose WAIT fell short: nothing of the caller's is in doubt, but
		// what it read may not survive a failover.
		return fmt.Errorf("%w: read not confirmed by replicas: %w", stockguard.ErrUnavailable, errors.New(err.Error()))
	case errors.Is(err, stockguard.ErrOutcomeUnknown), errors.Is(err, stockguard.ErrUnavailable):
		return err // Acked's own: applied and not confirmed, or refused before sending
	case errors.Is(err, redis.TxFailedErr):
		return fmt.Errorf("%w: watched key changed: %w", stockguard.ErrContention, err)
	case NotSent(err):
		if cerr := ended(ctx); cerr != nil {
			return cerr
		}
		if errors.Is(err, redis.ErrPoolTimeout) || errors.Is(err, redis.ErrPoolExhausted) {
			return fmt.Errorf("%w: every connection of the pool is busy, nothing sent: %w", stockguard.ErrContention, err)
		}
		return fmt.Errorf("%w: redis unreachable, nothing sent: %w", stockguard.ErrUnavailable, cause(err))
	case errors.As(err, &reply):
		if busy(reply) {
			return fmt.Errorf("%w: redis is busy: %w", stockguard.ErrContention, err)
		}
		return fmt.Errorf("%w: redis refused the command: %w", stockguard.ErrUnavailable, err)
	case effect == Read:
		if cerr := ended(ctx); cerr != nil {
			return cerr
		}
		return fmt.Errorf("%w: redis read failed, nothing changed: %w", stockguard.ErrUnavailable, cause(err))
	default:
		return fmt.Errorf("%w: redis failed after the command may have been sent: %w", stockguard.ErrOutcomeUnknown, cause(err))
	}
}

// busy reports whether a Redis error reply says the server is busy for a
// moment: a script or function running past busy-reply-threshold (BUSY),
// or a multi-key command during a cluster resharding (TRYAGAIN).
// Other codes only start alike (BUSYKEY, BUSYGROUP).
func busy(reply redis.Error) bool {
	code, _, _ := strings.Cut(reply.Error(), " ")
	return code == "BUSY" || code == "TRYAGAIN"
}

// ended returns ctx's error once it has ended or its deadline has passed
// (ctx.Err() reports a deadline only once the context's timer has fired, a
// moment later), else nil.
func ended(ctx context.Context) error {
	if err := strategy.Canceled(ctx); err != nil {
		return err
	}
	if dl, ok := ctx.Deadline(); ok && !time.Now().Before(dl) {
		return context.DeadlineExceeded
	}
	return nil
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
