package strategy

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync/atomic"
	"time"

	"github.com/stockguard/stockguard"
)

// RetryPolicy is stockguard.RetryPolicy, the one retry type a user sees;
// a strategy follows it through a Retrier built with NewRetrier, which
// does the retrying and keeps the counters.
type RetryPolicy = stockguard.RetryPolicy

// RetryCounter is implemented by strategies that retry internally (optimistic
// concurrency, lock acquisition). The harness reads it to report retries per
// operation.
type RetryCounter interface {
	// Retries returns the number of retries since the strategy was created.
	Retries() int64
}

// Default values of RetryPolicy's fields (TestDefaults_areTheRootPackages
// holds them to stockguard.RetryPolicy's).
const (
	DefaultMaxAttempts = 10
	DefaultBaseDelay   = time.Millisecond
	DefaultMaxDelay    = 100 * time.Millisecond
)

// retryError marks an op result that asks for another attempt.
type retryError struct{ reason error }

func (e *retryError) Error() string {
	if e.reason == nil {
		return "stockguard: retry"
	}
	return "stockguard: retry: " + e.reason.Error()
}

func (e *retryError) Unwrap() error { return e.reason }

// Retry wraps reason so that Retrier.Do tries again; reason (which may be
// nil) is reported if the attempts run out.
func Retry(reason error) error { return &retryError{reason} }

// withDefaults returns p with its zero fields set to the defaults.
func withDefaults(p RetryPolicy) RetryPolicy {
	if p.MaxAttempts <= 0 {
		p.MaxAttempts = DefaultMaxAttempts
	}
	if p.BaseDelay <= 0 {
		p.BaseDelay = DefaultBaseDelay
	}
	if p.MaxDelay <= 0 {
		p.MaxDelay = DefaultMaxDelay
	}
	if p.MaxDelay < p.BaseDelay { // a default MaxDelay below a BaseDelay set
		p.MaxDelay = p.BaseDelay
	}
	return p
}

// ceiling returns the backoff ceiling before retry number retry (0-based)
// when extra is the contention-derived floor of the ceiling.
func ceiling(p RetryPolicy, retry int, extra time.Duration) time.Duration {
	c := p.MaxDelay
	if retry < 30 && p.BaseDelay<<retry < c {
		c = p.BaseDelay << retry
	}
	if extra > c {
		c = min(extra, p.MaxDelay)
	}
	return c
}

// Retrier runs operations under a RetryPolicy and counts their retries. One
// Retrier is shared by all requests of a strategy instance, so that an
// adaptive policy sees them all. It is safe for concurrent use.
type Retrier struct {
	policy  RetryPolicy
	retries atomic.Int64
	waiting atomic.Int64 // requests currently backing off
	attempt atomic.Int64 // EWMA of one attempt's duration, in ns
}

// NewRetrier returns a Retrier for policy (zero fields take their defaults).
func NewRetrier(policy RetryPolicy) *Retrier {
	return &Retrier{policy: withDefaults(policy)}
}

// Retries returns the number of retries made since r was created.
func (r *Retrier) Retries() int64 { return r.retries.Load() }

// Do calls op until it returns an error not made by Retry (nil included) and
// returns that error. When the attempts run out it returns an error wrapping
// stockguard.ErrContention and the last reason, or the last reason alone when it wraps
// stockguard.ErrUnavailable; when ctx ends while backing off it
// returns ctx's error (Canceled): the caller gave up, and nothing was
// applied. op must have applied nothing when it asks for a retry.
func (r *Retrier) Do(ctx context.Context, op func(ctx context.Context) error) error {
	p := r.policy
	var timer *time.Timer
	for attempt := 1; ; attempt++ {
		began := time.Now()
		err := op(ctx)
		var re *retryError
		if !errors.As(err, &re) {
			return err
		}
		if p.Adaptive {
			r.observe(time.Since(began))
		}
		if attempt >= p.MaxAttempts {
			if errors.Is(re.reason, stockguard.ErrUnavailable) {
				// The last attempt met a server that could not serve: "busy,
				// try again" would hide an outage from the caller.
				return fmt.Errorf("gave up after %d attempts: %w", attempt, re.reason)
			}
			if re.reason == nil {
				return fmt.Errorf("%w after %d attempts", stockguard.ErrContention, attempt)
			}
			return fmt.Errorf("%w after %d attempts: %w", stockguard.ErrContention, attempt, re.reason)
		}
		r.retries.Add(1)
		var extra time.Duration
		if p.Adaptive {
			extra = time.Duration(r.waiting.Add(1) * r.attempt.Load())
		}
		d := rand.N(ceiling(p, attempt-1, extra)) + 1
		if timer == nil {
			timer = time.NewTimer(d)
			defer timer.Stop()
		} else {
			timer.Reset(d)
		}
		select {
		case <-ctx.Done():
			if p.Adaptive {
				r.waiting.Add(-1)
			}
			return fmt.Errorf("gave up after %d attempts: %w", attempt, Canceled(ctx))
		case <-timer.C:
		}
		if p.Adaptive {
			r.waiting.Add(-1)
		}
	}
}

// observe folds one attempt's duration into the EWMA (weight 1/8). Lost
// updates between racing writers only blur an estimate, so plain
// load/store is enough.
func (r *Retrier) observe(d time.Duration) {
	old := r.attempt.Load()
	if old == 0 {
		r.attempt.Store(int64(d))
		return
	}
	r.attempt.Store(old + (int64(d)-old)/8)
}
