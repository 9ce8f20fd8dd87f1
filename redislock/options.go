package redislock

import (
	"errors"
	"fmt"
	"time"

	"github.com/stockguard/stockguard"
	"github.com/stockguard/stockguard/internal/rediskeys"
)

// Option configures a constructor of this package (NewAtomic, New,
// NewGuarded, NewRedlockGuarded, NewSegmented, NewRedlock). Each
// constructor documents the options it reads and ignores the rest.
//
// An invalid option value (each option says which values it accepts) is
// never clamped and never panics: it makes every method of what the
// constructor built — Obtain, Decrement, SetStock, Stock, WriteFenced —
// return an error wrapping stockguard.ErrInvalidRequest, before any I/O.
// The package's other constructor arguments follow the same rule (an
// empty list of Redlock masters, a stock master out of range).
type Option func(*options)

type options struct {
	keys    rediskeys.Keys
	orders  orderOptions // NewAtomic's Orders: see orders_options.go
	retry   stockguard.RetryPolicy
	store   Store         // NewGuarded: where the stock lives; nil means Redis
	lockTTL time.Duration // NewGuarded, NewSegmented: lease of the locks

	batchSize int // NewBatched: requests per script call

	segments     int  // NewSegmented: segments per SKU
	segmentLocks bool // NewSegmented: per-segment locks

	nodeTimeout time.Duration // NewRedlock: per-master timeout; 0 means derived from the ttl
	drift       drift         // NewRedlock: clock drift allowance

	stockMaster int // NewRedlockGuarded: index of the master that keeps the stock

	err error // the first invalid option
}

func newOptions(opts []Option) options {
	o := options{
		lockTTL:   DefaultLockTTL,
		segments:  DefaultSegments,
		batchSize: DefaultBatchSize,
		drift:     drift{factor: DefaultDriftFactor, fixed: DefaultDriftFixed},
	}
	for _, opt := range opts {
		opt(&o)
	}
	return o
}

// fail records the first invalid option.
func (o *options) fail(err error) {
	if o.err == nil {
		o.err = invalid(err)
	}
}

// invalid wraps err, an invalid option or constructor argument, in
// stockguard.ErrInvalidRequest.
func invalid(err error) error {
	if errors.Is(err, stockguard.ErrInvalidRequest) {
		return fmt.Errorf("redislock: %w", err)
	}
	return fmt.Errorf("%w: redislock: %w", stockguard.ErrInvalidRequest, err)
}

// WithPrefix puts prefix in front of every key: "<prefix>stock:{sku}",
// "<prefix>lock:{sku}", "<prefix>fence:{sku}". A prefix with "{" or "}"
// is an invalid option: it would override the SKUs' hash tags
// (rediskeys.ValidatePrefix). Default "".
func WithPrefix(prefix string) Option {
	return func(o *options) {
		if err := rediskeys.ValidatePrefix(prefix); err != nil {
			o.fail(err)
			return
		}
		o.keys.Prefix = prefix
	}
}

// WithRetry sets the retry policy of an inventory's requests after
// contention (a lock held by someone else, a lost race); zero fields take
// stockguard's defaults. It is not how a lock's Obtain retries: that is
// ObtainRetry. A policy RetryPolicy.Validate refuses is an invalid
// option. Default: stockguard's defaults (NewSegmented with
// WithSegmentLocks: see there).
func WithRetry(p stockguard.RetryPolicy) Option {
	return func(o *options) {
		if err := p.Validate(); err != nil {
			o.fail(err)
			return
		}
		o.retry = p
	}
}

// WithLockTTL sets the lease of the locks NewGuarded and NewRedlockGuarded
// take around each write, and of NewSegmented's gather and segment locks:
// at least 1ms. Default DefaultLockTTL.
func WithLockTTL(d time.Duration) Option {
	return func(o *options) {
		if d < time.Millisecond {
			o.fail(fmt.Errorf("lock ttl %v below 1ms", d))
			return
		}
		o.lockTTL = d
	}
}

// WithStore makes NewGuarded keep the stock in s (not nil) instead of in
// Redis. Default: a RedisStore over NewGuarded's client with the same
// prefix.
func WithStore(s Store) Option {
	return func(o *options) {
		if s == nil {
			o.fail(errors.New("nil Store"))
			return
		}
		o.store = s
	}
}
