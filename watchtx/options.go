package watchtx

import (
	"fmt"
	"time"

	"github.com/stockguard/stockguard"
	"github.com/stockguard/stockguard/internal/rediskeys"
)

// Defaults of New's retry policy (DefaultRetry). The policy is
// contention-aware (Adaptive): a request that lost a race backs off for
// longer the more requests of the same Inventory are backing off, times the
// recent length of an attempt, so that on a hot key the retries spread out
// instead of colliding again in the next round. DefaultMaxDelay must leave
// room for that spread (about writers × attempt time): with a 20ms cap, 64
// writers on one key fell to 0.1–0.5× the 1-writer throughput; with 100ms
// they keep 0.7–1.3× on 2 cores (BenchmarkInventoryScaling). Attempts are
// generous because a loser applied nothing; a request gives up
// (ErrContention) only under sustained overload.
const (
	DefaultMaxAttempts = 50
	DefaultBaseDelay   = time.Millisecond
	DefaultMaxDelay    = 100 * time.Millisecond
)

// DefaultRetry returns the retry policy of New without WithRetry:
// DefaultMaxAttempts, DefaultBaseDelay, DefaultMaxDelay, Adaptive.
func DefaultRetry() stockguard.RetryPolicy {
	return stockguard.RetryPolicy{
		MaxAttempts: DefaultMaxAttempts,
		BaseDelay:   DefaultBaseDelay,
		MaxDelay:    DefaultMaxDelay,
		Adaptive:    true,
	}
}

// Option configures New. An invalid option value makes every method of the
// Inventory return an error wrapping stockguard.ErrInvalidRequest, before
// any I/O — the rule of the other strategy packages: never a clamp or a
// panic.
type Option func(*options)

type options struct {
	keys  rediskeys.Keys
	retry stockguard.RetryPolicy
	err   error // the first invalid option
}

// WithPrefix puts prefix in front of every key: "<prefix>stock:{sku}", the
// same keys as redislock.NewAtomic with the same prefix. A prefix with "{"
// or "}" is an invalid option: it would override the SKUs' hash tags
// (rediskeys.ValidatePrefix). Default "".
func WithPrefix(prefix string) Option {
	return func(o *options) {
		if err := rediskeys.ValidatePrefix(prefix); err != nil {
			if o.err == nil {
				o.err = fmt.Errorf("%w: watchtx: %w", stockguard.ErrInvalidRequest, err)
			}
			return
		}
		o.keys.Prefix = prefix
	}
}

// WithRetry sets the policy for retrying after a conflict (EXEC aborted
// because the key changed after WATCH). Zero fields take stockguard's
// defaults, not DefaultRetry's; a policy RetryPolicy.Validate refuses is
// an invalid option. Default DefaultRetry().
func WithRetry(p stockguard.RetryPolicy) Option {
	return func(o *options) {
		if err := p.Validate(); err != nil {
			if o.err == nil {
				o.err = fmt.Errorf("watchtx: %w", err)
			}
			return
		}
		o.retry = p
	}
}
