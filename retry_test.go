package stockguard_test

import (
	"errors"
	"testing"
	"time"

	"github.com/stockguard/stockguard"
)

// Backoff waits in (0, ceiling], the ceiling doubling from BaseDelay up to
// MaxDelay, and stops after MaxAttempts tries.
func TestRetryPolicy_Backoff(t *testing.T) {
	p := stockguard.RetryPolicy{MaxAttempts: 6, BaseDelay: time.Millisecond, MaxDelay: 5 * time.Millisecond}
	for retry, ceiling := range map[int]time.Duration{1: time.Millisecond, 2: 2 * time.Millisecond, 3: 4 * time.Millisecond, 4: 5 * time.Millisecond, 5: 5 * time.Millisecond} {
		for range 100 {
			if d, ok := p.Backoff(retry); !ok || d <= 0 || d > ceiling {
				t.Fatalf("Backoff(%d) = %v, %v; want a wait in (0, %v]", retry, d, ok, ceiling)
			}
		}
	}
	if d, ok := p.Backoff(6); ok {
		t.Errorf("Backoff(6) = %v, true; want false after 6 tries", d)
	}
	if d, ok := (stockguard.RetryPolicy{MaxAttempts: 1}).Backoff(1); ok {
		t.Errorf("one try: Backoff(1) = %v, true; want false", d)
	}
}

func TestRetryPolicy_Validate(t *testing.T) {
	for _, p := range []stockguard.RetryPolicy{{MaxAttempts: -1}, {BaseDelay: -1}, {MaxDelay: -1}, {BaseDelay: time.Second, MaxDelay: time.Millisecond}} {
		if err := p.Validate(); !errors.Is(err, stockguard.ErrInvalidRequest) {
			t.Errorf("%+v: %v, want ErrInvalidRequest", p, err)
		}
	}
	for _, p := range []stockguard.RetryPolicy{{}, {MaxAttempts: 1}, {BaseDelay: time.Second}, {BaseDelay: time.Millisecond, MaxDelay: time.Second, Adaptive: true}} {
		if err := p.Validate(); err != nil {
			t.Errorf("%+v: %v, want nil", p, err)
		}
	}
}
