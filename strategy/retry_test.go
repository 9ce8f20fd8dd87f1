package strategy_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stockguard/stockguard"
	"github.com/stockguard/stockguard/strategy"
)

var errConflict = errors.New("version conflict")

func TestRetrier_Do_retriesUntilSuccess(t *testing.T) {
	r := strategy.NewRetrier(strategy.RetryPolicy{MaxAttempts: 5, BaseDelay: time.Microsecond})
	calls := 0
	err := r.Do(t.Context(), func(context.Context) error {
		calls++
		if calls < 3 {
			return strategy.Retry(errConflict)
		}
		return nil
	})
	if err != nil || calls != 3 || r.Retries() != 2 {
		t.Fatalf("err=%v calls=%d retries=%d, want nil 3 2", err, calls, r.Retries())
	}
}

func TestRetrier_Do_exhaustedIsContention(t *testing.T) {
	r := strategy.NewRetrier(strategy.RetryPolicy{MaxAttempts: 3, BaseDelay: time.Microsecond})
	calls := 0
	err := r.Do(t.Context(), func(context.Context) error { calls++; return strategy.Retry(errConflict) })
	if !errors.Is(err, stockguard.ErrContention) || !errors.Is(err, errConflict) || calls != 3 {
		t.Fatalf("err=%v calls=%d, want ErrContention wrapping the reason after 3 calls", err, calls)
	}
}

func TestRetrier_Do_exhaustedWhileUnavailableIsUnavailable(t *testing.T) {
	r := strategy.NewRetrier(strategy.RetryPolicy{MaxAttempts: 3, BaseDelay: time.Microsecond})
	down := fmt.Errorf("%w: a master did not answer", stockguard.ErrUnavailable)
	err := r.Do(t.Context(), func(context.Context) error { return strategy.Retry(down) })
	if !errors.Is(err, stockguard.ErrUnavailable) || errors.Is(err, stockguard.ErrContention) {
		t.Fatalf("err=%v, want ErrUnavailable and not ErrContention: the last attempt failed for a server that could not serve", err)
	}
}

func TestRetrier_Do_passesOtherErrorsThrough(t *testing.T) {
	r := strategy.NewRetrier(strategy.RetryPolicy{})
	calls := 0
	err := r.Do(t.Context(), func(context.Context) error { calls++; return stockguard.ErrInsufficientStock })
	if !errors.Is(err, stockguard.ErrInsufficientStock) || errors.Is(err, stockguard.ErrContention) || calls != 1 {
		t.Fatalf("err=%v calls=%d", err, calls)
	}
}

func TestRetrier_Do_stopsWhenContextEnds(t *testing.T) {
	r := strategy.NewRetrier(strategy.RetryPolicy{MaxAttempts: 1000, BaseDelay: time.Hour, MaxDelay: time.Hour})
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Millisecond)
	defer cancel()
	err := r.Do(ctx, func(context.Context) error { return strategy.Retry(nil) })
	if !errors.Is(err, context.DeadlineExceeded) || errors.Is(err, stockguard.ErrContention) {
		t.Fatalf("err=%v, want DeadlineExceeded alone: one contract error per result", err)
	}
}

func TestRetryPolicy_delaysStayWithinCeiling(t *testing.T) {
	// Adaptive with no contention history behaves as plain exponential:
	// doubling from BaseDelay, never above MaxDelay, whatever the retry.
	p := strategy.RetryPolicy{MaxAttempts: 40, BaseDelay: time.Millisecond, MaxDelay: 2 * time.Millisecond, Adaptive: true}
	for retry, want := range []time.Duration{time.Millisecond, 2 * time.Millisecond, 2 * time.Millisecond} {
		if got := strategy.Ceiling(p, retry, 0); got != want {
			t.Errorf("ceiling before retry %d = %v, want %v", retry, got, want)
		}
	}
	for retry := range 64 {
		if got := strategy.Ceiling(p, retry, 0); got <= 0 || got > p.MaxDelay {
			t.Fatalf("ceiling before retry %d = %v, want in (0, %v]", retry, got, p.MaxDelay)
		}
	}
	if got := strategy.Ceiling(p, 0, time.Second); got != p.MaxDelay {
		t.Errorf("ceiling with a 1s contention floor = %v, want MaxDelay %v", got, p.MaxDelay)
	}
}

func TestRetrier_Do_concurrentAdaptive(t *testing.T) {
	r := strategy.NewRetrier(strategy.RetryPolicy{MaxAttempts: 50, BaseDelay: 10 * time.Microsecond, MaxDelay: time.Millisecond, Adaptive: true})
	var mu sync.Mutex
	owner := -1 // a one-slot resource: an attempt conflicts while another holds it
	var wg sync.WaitGroup
	for g := range 16 {
		wg.Go(func() {
			err := r.Do(t.Context(), func(context.Context) error {
				mu.Lock()
				if owner != -1 {
					mu.Unlock()
					return strategy.Retry(errConflict)
				}
				owner = g
				mu.Unlock()
				time.Sleep(50 * time.Microsecond)
				mu.Lock()
				owner = -1
				mu.Unlock()
				return nil
			})
			if err != nil {
				t.Errorf("goroutine %d: %v", g, err)
			}
		})
	}
	wg.Wait()
}

func TestRetryPolicy_Validate(t *testing.T) {
	ms := time.Millisecond
	for _, tc := range []struct {
		name  string
		p     strategy.RetryPolicy
		valid bool
	}{
		{"zero means defaults", strategy.RetryPolicy{}, true},
		{"all set", strategy.RetryPolicy{MaxAttempts: 3, BaseDelay: ms, MaxDelay: 10 * ms}, true},
		{"base above the default max", strategy.RetryPolicy{BaseDelay: time.Second}, true},
		{"equal delays", strategy.RetryPolicy{BaseDelay: ms, MaxDelay: ms}, true},
		{"negative attempts", strategy.RetryPolicy{MaxAttempts: -1}, false},
		{"negative base", strategy.RetryPolicy{BaseDelay: -ms}, false},
		{"negative max", strategy.RetryPolicy{MaxDelay: -ms}, false},
		{"max below base", strategy.RetryPolicy{BaseDelay: 2 * ms, MaxDelay: ms}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.p.Validate()
			if tc.valid != (err == nil) || (err != nil && strategy.Contract(err) != stockguard.ErrInvalidRequest) {
				t.Fatalf("Validate() = %v, want valid %v (else ErrInvalidRequest)", err, tc.valid)
			}
		})
	}
}

// The defaults strategy authors see are the ones stockguard.RetryPolicy
// applies itself (Backoff): the same tries, each wait within the
// Retrier's ceiling.
func TestDefaults_areTheRootPackages(t *testing.T) {
	var p stockguard.RetryPolicy
	for retry := 1; retry < strategy.DefaultMaxAttempts; retry++ {
		for range 100 {
			d, ok := p.Backoff(retry)
			if c := strategy.Ceiling(p, retry-1, 0); !ok || d <= 0 || d > c {
				t.Fatalf("Backoff(%d) = %v, %v; want a wait in (0, %v]", retry, d, ok, c)
			}
		}
	}
	if _, ok := p.Backoff(strategy.DefaultMaxAttempts); ok {
		t.Errorf("Backoff(%d) retries: the default is %d tries", strategy.DefaultMaxAttempts, strategy.DefaultMaxAttempts)
	}
}
