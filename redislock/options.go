package redislock

import (
	"time"

	"github.com/stockguard/stockguard"
	"github.com/stockguard/stockguard/internal/rediskeys"
)

// Option configures a constructor of this package (NewAtomic, New,
// NewGuarded, NewRedlockGuarded, NewSegmented, NewRedlock). Each
// constructor documents the options it reads and ignores the rest.
type Option func(*options)

type options struct {
	keys    rediskeys.Keys
	retry   stockguard.RetryPolicy
	store   Store         // NewGuarded: where the stock lives; nil means Redis
	lockTTL time.Duration // NewGuarded: lease of the SKU lock; 0 means DefaultLockTTL

	segments     int  // NewSegmented: segments per SKU; 0 means DefaultSegments
	segmentLocks bool // NewSegmented: seed 002's per-segment locks

	nodeTimeout time.Duration // NewRedlock: per-master timeout; 0 means derived from the ttl
	drift       *drift        // NewRedlock: clock drift allowance; nil means the defaults

	stockMaster int // NewRedlockGuarded: index of the master that keeps the stock
}

func newOptions(opts []Option) options {
	var o options
	for _, opt := range opts {
		opt(&o)
	}
	return o
}

// WithPrefix puts prefix in front of every key: "<prefix>stock:{sku}",
// "<prefix>lock:{sku}", "<prefix>fence:{sku}". Default "".
func WithPrefix(prefix string) Option {
	return func(o *options) { o.keys.Prefix = prefix }
}

// WithRetry sets the policy for retrying after contention (a lock held by
// someone else). Zero fields take stockguard's defaults.
func WithRetry(p stockguard.RetryPolicy) Option {
	return func(o *options) { o.retry = p }
}
