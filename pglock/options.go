package pglock

import (
	"errors"
	"fmt"
	"regexp"
	"time"

	"github.com/stockguard/stockguard"
	"github.com/stockguard/stockguard/strategy"
)

// Option configures CreateSchema and the constructors of this package. Each
// documents the options it reads and ignores the rest. An invalid option
// value makes CreateSchema and every constructor return an error wrapping
// stockguard.ErrInvalidRequest, before any I/O.
type Option func(*options)

type options struct {
	table     string
	retry     *strategy.RetryPolicy
	mode      LockMode
	lockWait  time.Duration
	batchSize int // NewBatched
	segments  int // NewSegmented
	err       error
}

// Defaults of the options.
const (
	DefaultTable = "stock"
	// DefaultLockTimeout bounds a wait for a row or advisory lock (the
	// session's lock_timeout) in the strategies that wait for one.
	DefaultLockTimeout = 5 * time.Second
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
func WithRetry(p strategy.RetryPolicy) Option {
	return func(o *options) {
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
		if d < time.Millisecond || d > 24*time.Hour {
			o.fail(fmt.Errorf("lock timeout %v outside 1ms…24h", d))
			return
		}
		o.lockWait = d
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
