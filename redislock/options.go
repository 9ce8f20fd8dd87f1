package redislock

import (
	"errors"
	"fmt"
	"time"

	"github.com/stockguard/stockguard"
	"github.com/stockguard/stockguard/internal/optset"
	"github.com/stockguard/stockguard/internal/rediskeys"
	"github.com/stockguard/stockguard/internal/redisx"
	"github.com/stockguard/stockguard/redislock/lock"
	"github.com/stockguard/stockguard/strategy"
)

// Option configures a constructor of this package. Each constructor reads
// these options, and every one reads WithReplicaAck and WithAOFAck:
//
//	NewRedisStore       WithPrefix
//	NewAtomic           WithPrefix, WithOrderRetention, WithOrderStream, WithAttemptValidity,
//	                    WithClockSkew
//	NewBatched          WithPrefix, WithBatchSize, WithOrderRetention, WithAttemptValidity,
//	                    WithClockSkew
//	NewGuarded          WithPrefix, WithRetry, WithLockTTL, WithStore
//	NewSegmented        WithPrefix, WithRetry, WithLockTTL, WithSegments, WithSegmentLocks
//	NewRedlockGuarded   WithPrefix, WithNodeTimeout, WithDrift, WithRetry, WithLockTTL,
//	                    WithStockMaster
//	New, NewRedlock     deprecated forwarders to package lock: WithPrefix, and
//	                    for NewRedlock WithNodeTimeout and WithDrift
//
// An option the constructor does not read, and an invalid option value
// (each option says which values it accepts), is never ignored, clamped
// or a panic: the constructor refuses it with an error wrapping
// stockguard.ErrInvalidRequest that names it, before any I/O. The
// package's other constructor arguments follow the same rule (an empty
// list of Redlock masters, a stock master out of range).
type Option func(*options)

// optionSet is a set of this package's options, one bit each: those given
// to a constructor, and those it reads.
type optionSet = optset.Set

const (
	optPrefix optionSet = 1 << iota
	optRetry
	optLockTTL
	optStore
	optReplicaAck
	optAOFAck
	optBatchSize
	optSegments
	optSegmentLocks
	optNodeTimeout
	optDrift
	optStockMaster
	optOrderRetention
	optOrderStream
	optAttemptValidity
	optClockSkew
)

// optionNames are the options' names, in optionSet's bit order.
var optionNames = [...]string{"WithPrefix", "WithRetry", "WithLockTTL", "WithStore",
	"WithReplicaAck", "WithAOFAck", "WithBatchSize", "WithSegments", "WithSegmentLocks",
	"WithNodeTimeout", "WithDrift", "WithStockMaster", "WithOrderRetention", "WithOrderStream",
	"WithAttemptValidity", "WithClockSkew"}

// What each constructor reads (Option's table).
const (
	optAck          = optReplicaAck | optAOFAck
	readsClient     = optPrefix | optAck
	readsAtomic     = readsClient | optOrderRetention | optOrderStream | optAttemptValidity | optClockSkew
	readsBatched    = readsClient | optBatchSize | optOrderRetention | optOrderStream | optAttemptValidity | optClockSkew
	readsGuarded    = readsClient | optRetry | optLockTTL | optStore
	readsSegmented  = readsClient | optRetry | optLockTTL | optSegments | optSegmentLocks
	readsRedlock    = readsClient | optNodeTimeout | optDrift
	readsRedlockGrd = readsRedlock | optRetry | optLockTTL | optStockMaster
)

// lockOptions returns, as package lock's options, the options given that
// the lock library reads (WithPrefix, the ack, WithNodeTimeout, WithDrift):
// what a constructor passes to the lock client it builds on.
func (o *options) lockOptions() []lock.Option {
	var out []lock.Option
	if o.given&optPrefix != 0 {
		out = append(out, lock.WithPrefix(o.keys.Prefix))
	}
	return append(o.lockAck(out...), o.redlock...)
}

// lockAck appends to opts the lock option of o's ack, if any, so that the
// lock clients a constructor builds write as acknowledged as its stock.
func (o *options) lockAck(opts ...lock.Option) []lock.Option {
	switch {
	case !o.ack.On():
	case o.ack.AOF:
		opts = append(opts, lock.WithAOFAck(o.ack.Local, o.ack.Replicas, o.ack.Timeout))
	default:
		opts = append(opts, lock.WithReplicaAck(o.ack.Replicas, o.ack.Timeout))
	}
	return opts
}

// only refuses the options given that constructor ctor does not read: an
// option silently ignored would leave the caller believing it in force.
func (o *options) only(ctor string, reads optionSet) {
	if err := optset.Unread(ctor, o.given, reads, optionNames[:]); err != nil {
		o.fail(err)
	}
}

type options struct {
	keys    rediskeys.Keys
	orders  orderOptions // NewAtomic's Orders
	retry   strategy.RetryPolicy
	store   Store         // NewGuarded: where the stock lives; nil means Redis
	lockTTL time.Duration // NewGuarded, NewSegmented: lease of the locks

	batchSize int // NewBatched: requests per script call

	segments     int  // NewSegmented: segments per SKU
	segmentLocks bool // NewSegmented: per-segment locks

	redlock []lock.Option // NewRedlockGuarded: WithNodeTimeout, WithDrift, checked by lock.NewRedlock

	stockMaster int // NewRedlockGuarded: index of the master that keeps the stock

	ack redisx.Ack // WithReplicaAck, WithAOFAck: what confirms a write; zero for nothing

	given optionSet // the options given
	err   error     // the first invalid option
}

func newOptions(opts []Option) options {
	o := options{
		lockTTL:   DefaultLockTTL,
		segments:  DefaultSegments,
		batchSize: DefaultBatchSize,
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
		o.given |= optPrefix
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
// lock.ObtainRetry, which takes the same type. A policy
// RetryPolicy.Validate refuses is an invalid option. Default: stockguard's
// defaults (NewSegmented with WithSegmentLocks: see there).
func WithRetry(p stockguard.RetryPolicy) Option {
	return func(o *options) {
		o.given |= optRetry
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
		o.given |= optLockTTL
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
		o.given |= optStore
		if s == nil {
			o.fail(errors.New("nil Store"))
			return
		}
		o.store = s
	}
}

// DefaultReplicaAck is the number of replicas a write waits for without
// WithReplicaAck or WithAOFAck: none — a write counts once the master has
// applied it, and a failover that promotes a replica which never received
// it loses it.
const DefaultReplicaAck = 0

// WithReplicaAck makes every write of what the constructor builds count
// only once n replicas have it: each write (a stock script, a batch — one
// WAIT per batch —, a lock's obtain, refresh and release, the fencing
// counter, each Orders phase, SetStock) is followed on its own connection,
// in the same pipeline, by WAIT n timeout. Fewer than n replicas within
// timeout makes the method return an error wrapping
// stockguard.ErrOutcomeUnknown (detail: "acknowledged by k of n
// replicas within timeout"): the write was applied on the master
// and may or may not survive a failover. Reads that may write (Stock
// giving due holds back, Order resolving) report a short WAIT as
// stockguard.ErrUnavailable. A lock's Obtain whose WAIT falls short
// releases the lock again (owner-checked) and returns an error wrapping
// stockguard.ErrOutcomeUnknown, never a handle: see lock.Client.Obtain.
//
// n must be 1…100 and timeout whole milliseconds in 1ms…1min; anything
// else is an invalid option. Not with WithAOFAck. On a *redis.Ring every
// write fails with stockguard.ErrUnavailable (a Ring cannot route a
// keyless WAIT). An acknowledged write survives a failover that promotes
// one of the replicas that acknowledged it. Default DefaultReplicaAck
// (off).
func WithReplicaAck(n int, timeout time.Duration) Option {
	return func(o *options) {
		o.given |= optReplicaAck
		o.setAck(redisx.Ack{Replicas: n, Timeout: timeout})
	}
}

// WithAOFAck is WithReplicaAck with WAITAOF local replicas timeout
// instead of WAIT: a write counts once local (0 or 1) masters and replicas
// (0…100, not both 0) have fsynced it to their append-only files, which
// survives a restart of every server, not only a failover. It needs Redis
// ≥ 7.2 or Valkey ≥ 8 (and appendonly yes on the master for local 1):
// a server without WAITAOF makes the first write, and every one after it,
// fail with stockguard.ErrUnavailable, nothing sent. Otherwise the errors
// are WithReplicaAck's. Default off.
func WithAOFAck(local, replicas int, timeout time.Duration) Option {
	return func(o *options) {
		o.given |= optAOFAck
		o.setAck(redisx.Ack{AOF: true, Local: local, Replicas: replicas, Timeout: timeout})
	}
}

// setAck records a, or fails as redisx.Ack.Then says.
func (o *options) setAck(a redisx.Ack) {
	ack, err := o.ack.Then(a)
	if err != nil {
		o.fail(err)
		return
	}
	o.ack = ack
}
