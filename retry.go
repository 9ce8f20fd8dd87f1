package stockguard

import (
	"fmt"
	"math/rand/v2"
	"time"
)

// RetryPolicy bounds how a request is retried after contention — a lost
// race, a deadlock, a busy lock: at most MaxAttempts tries, sleeping
// between them for a random duration in (0, ceiling] — "full jitter",
// which spreads colliding writers apart instead of letting them retry in
// lock-step. The ceiling starts at BaseDelay, doubles with every retry of
// a request, and is capped at MaxDelay. Zero fields take the defaults
// below. Every strategy package's WithRetry takes one, and so does
// redislock's ObtainRetry (Backoff), for a lock's Obtain.
type RetryPolicy struct {
	// MaxAttempts is the number of tries, the first included. Default 10.
	MaxAttempts int
	// BaseDelay is the first backoff ceiling. Default 1ms.
	BaseDelay time.Duration
	// MaxDelay caps every backoff. Default 100ms.
	MaxDelay time.Duration
	// Adaptive makes the ceiling also grow with observed contention: the
	// number of requests of the same strategy instance currently backing
	// off, times the recent duration of one attempt. With N writers
	// colliding on one key, their retries then spread over about N
	// attempt-times — one retry in flight at a time — instead of N retries
	// piling up each round, which is what makes optimistic schemes collapse
	// under load. A lock's Obtain, which keeps no such count, refuses it.
	// Default false.
	Adaptive bool
}

// The defaults of RetryPolicy's zero fields (strategy.DefaultMaxAttempts,
// DefaultBaseDelay, DefaultMaxDelay give them to strategy authors).
const (
	defaultMaxAttempts = 10
	defaultBaseDelay   = time.Millisecond
	defaultMaxDelay    = 100 * time.Millisecond
)

// Validate reports a policy nothing follows as given: a negative field,
// or a MaxDelay below a BaseDelay when both are set. Zero fields are valid
// and mean the defaults. It returns nil or an error wrapping
// ErrInvalidRequest, which the options that take a policy report.
func (p RetryPolicy) Validate() error {
	switch {
	case p.MaxAttempts < 0:
		return fmt.Errorf("%w: retry policy: MaxAttempts %d is negative", ErrInvalidRequest, p.MaxAttempts)
	case p.BaseDelay < 0:
		return fmt.Errorf("%w: retry policy: BaseDelay %v is negative", ErrInvalidRequest, p.BaseDelay)
	case p.MaxDelay < 0:
		return fmt.Errorf("%w: retry policy: MaxDelay %v is negative", ErrInvalidRequest, p.MaxDelay)
	case p.MaxDelay > 0 && p.MaxDelay < p.BaseDelay:
		return fmt.Errorf("%w: retry policy: MaxDelay %v below BaseDelay %v", ErrInvalidRequest, p.MaxDelay, p.BaseDelay)
	}
	return nil
}

// Backoff returns the wait before retry number retry (1 for the first
// retry, the second try), or false when the policy's tries are spent:
// the policy without Adaptive.
func (p RetryPolicy) Backoff(retry int) (time.Duration, bool) {
	maxAttempts := cmpOr(p.MaxAttempts, defaultMaxAttempts)
	if retry >= maxAttempts {
		return 0, false
	}
	base, ceiling := cmpOr(p.BaseDelay, defaultBaseDelay), cmpOr(p.MaxDelay, defaultMaxDelay)
	ceiling = max(ceiling, base) // a default MaxDelay below a BaseDelay set
	if shift := retry - 1; shift < 30 && base<<shift < ceiling {
		ceiling = base << shift
	}
	return rand.N(ceiling) + 1, true
}

// cmpOr returns v, or def when v is not positive.
func cmpOr[T int | time.Duration](v, def T) T {
	if v <= 0 {
		return def
	}
	return v
}
