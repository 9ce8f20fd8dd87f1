package errtext

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/stockguard/stockguard"
)

func TestWrap(t *testing.T) {
	for _, tc := range []struct {
		name string
		err  error
		want string
		is   error
	}{
		{"detail after", fmt.Errorf("%w: key %q does not exist", stockguard.ErrUnknownSKU, "k"),
			`stockguard: unknown sku: watchtx: decrement "x": key "k" does not exist`, stockguard.ErrUnknownSKU},
		{"bare sentinel", stockguard.ErrInsufficientStock,
			`stockguard: insufficient stock: watchtx: decrement "x"`, stockguard.ErrInsufficientStock},
		{"fenced keeps its own text", fmt.Errorf("%w: token 3 < 4", stockguard.ErrFenced),
			`stockguard: write fenced off by a newer lock holder: stockguard: contention, gave up: watchtx: decrement "x": token 3 < 4`, stockguard.ErrContention},
		{"context error", context.Canceled, `context canceled: watchtx: decrement "x"`, context.Canceled},
		{"outside the contract", errors.New("boom"), `watchtx: decrement "x": boom`, nil},
		{"text not first", fmt.Errorf("inner: %w", stockguard.ErrUnavailable),
			`watchtx: decrement "x": inner: stockguard: backend unavailable`, stockguard.ErrUnavailable},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := Wrap(tc.err, "watchtx: decrement %q", "x")
			if got.Error() != tc.want {
				t.Errorf("Wrap = %q, want %q", got, tc.want)
			}
			if tc.is != nil && !errors.Is(got, tc.is) {
				t.Errorf("Wrap(%v) does not match %v", tc.err, tc.is)
			}
			if !errors.Is(got, tc.err) {
				t.Errorf("Wrap does not unwrap to its error")
			}
		})
	}
	if Wrap(nil, "x") != nil {
		t.Error("Wrap(nil) != nil")
	}
}
