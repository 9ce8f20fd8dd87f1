package watchtx

import (
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

// Option configures New. Neither option has an invalid value: a prefix is
// any string, and a RetryPolicy's zero fields mean stockguard's defaults.
// (Options that can be invalid follow the rule of the other strategy
// packages: an error wrapping stockguard.ErrInvalidRequest from every
// method, never a clamp or a panic.)
type Option func(*options)

type options struct {
	keys  rediskeys.Keys
	retry stockguard.RetryPolicy
}

// WithPrefix puts prefix in front of every key: "<prefix>stock:{sku}", the
// same keys as redislock.NewAtomic with the same prefix. Default "".
func WithPrefix(prefix string) Option {
	return func(o *options) { o.keys.Prefix = prefix }
}

// WithRetry sets the policy for retrying after a conflict (EXEC aborted
// because the key changed after WATCH). Zero fields take stockguard's
// defaults, not DefaultRetry's. Default DefaultRetry().
func WithRetry(p stockguard.RetryPolicy) Option {
	return func(o *options) { o.retry = p }
}
