package pglock

import (
	"errors"
	"fmt"
	"regexp"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/stockguard/stockguard"
	"github.com/stockguard/stockguard/internal/optset"
	"github.com/stockguard/stockguard/internal/sqlpool"
	"github.com/stockguard/stockguard/strategy"
)

// Option configures CreateSchema, PurgeOrders and the constructors of this
// package, which read these options:
//
//	CreateSchema                               WithTable
//	PurgeOrders                                WithTable, WithOrderRetention
//	NewAtomic, NewOptimistic, NewSerializable  WithTable, WithRetry
//	NewBatched                                 WithTable, WithRetry, WithLockTimeout, WithBatchSize
//	NewSegmented                               WithTable, WithRetry, WithLockTimeout, WithSegments
//	NewPessimistic                             WithTable, WithRetry, WithLockTimeout, WithLockMode
//	NewAdvisoryLock                            WithTable, WithRetry, WithLockTimeout
//
// An option the function does not read, and an invalid option value, is
// never ignored or clamped: the function returns an error wrapping
// stockguard.ErrInvalidRequest that names it, before any I/O. So does a
// pool opened for MySQL.
type Option func(*options)

// optionSet is a set of this package's options, one bit each: those given
// to a function, and those it reads.
type optionSet = optset.Set

const (
	optTable optionSet = 1 << iota
	optRetry
	optLockMode
	optLockTimeout
	optOrderRetention
	optBatchSize
	optSegments
)

// optionNames are the options' names, in optionSet's bit order.
var optionNames = [...]string{"WithTable", "WithRetry", "WithLockMode", "WithLockTimeout",
	"WithOrderRetention", "WithBatchSize", "WithSegments"}

// What each function reads (Option's table).
const (
	readsSchema      = optTable
	readsPurge       = optTable | optOrderRetention
	readsAtomic      = optTable | optRetry
	readsLocking     = readsAtomic | optLockTimeout
	readsBatched     = readsLocking | optBatchSize
	readsSegmented   = readsLocking | optSegments
	readsPessimistic = readsLocking | optLockMode
)

// build reads opts for function fn, which reads the options in reads and
// works over db: it refuses an invalid option, one fn does not read (an
// option silently ignored would leave the caller believing it in force)
// and a pool opened for another server.
func build(fn string, db *sqlx.DB, reads optionSet, opts []Option) (options, error) {
	o := newOptions(opts)
	if err := optset.Unread(fn, o.given, reads, optionNames[:]); err != nil {
		o.fail(err)
	}
	if err := sqlpool.Check(db, sqlpool.PostgreSQL); err != nil {
		o.fail(err)
	}
	return o, o.err
}

type options struct {
	table     string
	retry     *strategy.RetryPolicy
	mode      LockMode
	lockWait  time.Duration
	batchSize int           // NewBatched
	segments  int           // NewSegmented
	retention time.Duration // PurgeOrders
	given     optionSet     // the options given
	err       error
}

// Defaults of the options.
const (
	DefaultTable = "stock"
	// DefaultLockTimeout bounds a wait for a row or advisory lock (the
	// session's lock_timeout) in the strategies that wait for one.
	DefaultLockTimeout = 5 * time.Second
	// DefaultOrderRetention is how long PurgeOrders keeps a closed order
	// after its last change: 7 days, the longest hold.
	DefaultOrderRetention = 7 * 24 * time.Hour
)

// LockMode says how NewPessimistic's SELECT … FOR UPDATE treats a row that
// another transaction holds.
type LockMode int

const (
	// LockWait waits for the row, at most the lock timeout
	// (WithLockTimeout).
	LockWait LockMode = iota
	// LockNoWait fails at once with stockguard.ErrContention (FOR UPDATE
	// NOWAIT, SQLSTATE 55P03).
	LockNoWait
	// LockSkipLocked skips the busy row and reports stockguard.ErrContention
	// (FOR UPDATE SKIP LOCKED).
	LockSkipLocked
)

func (m LockMode) String() string {
	switch m {
	case LockWait:
		return "wait"
	case LockNoWait:
		return "nowait"
	case LockSkipLocked:
		return "skiplocked"
	}
	return fmt.Sprintf("LockMode(%d)", int(m))
}

// identifier is what WithTable accepts: a plain identifier, spliced into
// statements (double-quoted), so nothing else may reach them. 48 bytes
// leave room for the names derived from it (<table>_order_lines) within
// PostgreSQL's 63-byte limit.
var identifier = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]{0,47}$`)

// WithTable names the stock table: 1–48 ASCII letters, digits or
// underscores, not starting with a digit; it is quoted, so case matters.
// Default "stock".
func WithTable(name string) Option {
	return func(o *options) {
		o.given |= optTable
		if !identifier.MatchString(name) {
			o.fail(fmt.Errorf("table name %q is not a plain identifier ([A-Za-z_][A-Za-z0-9_]{0,47})", name))
			return
		}
		o.table = name
	}
}

// WithRetry sets the policy for retrying a request that applied nothing:
// after a deadlock (40P01) or serialization failure (40001), a version
// conflict (NewOptimistic), or a row that changed between a refused UPDATE
// and the read explaining it. Zero fields take stockguard's defaults; a
// policy RetryPolicy.Validate refuses is an invalid option. Default: the
// stockguard defaults.
func WithRetry(p stockguard.RetryPolicy) Option {
	return func(o *options) {
		o.given |= optRetry
		if err := p.Validate(); err != nil {
			o.fail(err)
			return
		}
		o.retry = &p
	}
}

// WithLockMode sets NewPessimistic's lock mode. Default LockWait.
func WithLockMode(m LockMode) Option {
	return func(o *options) {
		o.given |= optLockMode
		if m < LockWait || m > LockSkipLocked {
			o.fail(fmt.Errorf("unknown lock mode %v", m))
			return
		}
		o.mode = m
	}
}

// WithLockTimeout bounds how long a strategy that waits for a lock
// (NewPessimistic with LockWait, NewAdvisoryLock, NewBatched's fallback,
// NewSegmented's sweep) waits, through the session's lock_timeout, which
// the server enforces: 1 ms…1 day. When it runs out the request fails with
// stockguard.ErrContention (55P03) and nothing changed. Default
// DefaultLockTimeout (5s).
func WithLockTimeout(d time.Duration) Option {
	return func(o *options) {
		o.given |= optLockTimeout
		if d < time.Millisecond || d > 24*time.Hour {
			o.fail(fmt.Errorf("lock timeout %v outside 1ms…24h", d))
			return
		}
		o.lockWait = d
	}
}

// WithOrderRetention sets how long PurgeOrders keeps an order's record
// after its last change: 1 minute…100 years. While a record is kept, its ID
// is deduplicated (a retry takes nothing twice) and Return, Confirm and
// Order find it; past it, PurgeOrders may delete the record, and the ID is
// then unknown — a Take under it would take afresh. PurgeOrders never
// deletes a hold that is still held, whatever its age. Nothing is deleted
// unless PurgeOrders runs. Default DefaultOrderRetention (7 days).
func WithOrderRetention(d time.Duration) Option {
	return func(o *options) {
		o.given |= optOrderRetention
		if d < time.Minute || d > 100*365*24*time.Hour {
			o.fail(fmt.Errorf("order retention %v outside 1m…100y", d))
			return
		}
		o.retention = d
	}
}

func (o *options) fail(err error) {
	switch {
	case o.err != nil: // the first invalid option is reported
	case errors.Is(err, stockguard.ErrInvalidRequest):
		o.err = fmt.Errorf("pglock: %w", err)
	default:
		o.err = fmt.Errorf("%w: pglock: %w", stockguard.ErrInvalidRequest, err)
	}
}

// within reports whether n, the value of option what, lies in lo…hi, and
// records the failure when it does not.
func (o *options) within(what string, n, lo, hi int) bool {
	if n < lo || n > hi {
		o.fail(fmt.Errorf("%s %d outside %d…%d", what, n, lo, hi))
		return false
	}
	return true
}

func newOptions(opts []Option) options {
	o := options{
		table:     DefaultTable,
		lockWait:  DefaultLockTimeout,
		batchSize: DefaultBatchSize,
		segments:  DefaultSegments,
		retention: DefaultOrderRetention,
	}
	for _, opt := range opts {
		opt(&o)
	}
	return o
}

// retryPolicy returns the configured policy, or def.
func (o *options) retryPolicy(def strategy.RetryPolicy) strategy.RetryPolicy {
	if o.retry != nil {
		return *o.retry
	}
	return def
}
