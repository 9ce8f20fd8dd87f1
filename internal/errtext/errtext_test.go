package errtext

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/stockguard/stockguard"
	"github.com/stockguard/stockguard/strategy"
)

// TestConditions_oneTextPerCondition: each contract condition has one
// text, the contract error's first, and matches its sentinel.
func TestConditions_oneTextPerCondition(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want string
		is   error
	}{
		{Insufficient("hot-sku", 10, 11), `stockguard: insufficient stock: "hot-sku" has 10, 11 wanted`, stockguard.ErrInsufficientStock},
		{Insufficient("hot-sku", 0, 1), `stockguard: insufficient stock: "hot-sku" has 0, 1 wanted`, stockguard.ErrInsufficientStock},
		{Insufficient("hot-sku", Unknown, 11), `stockguard: insufficient stock: "hot-sku" has fewer than the 11 wanted`, stockguard.ErrInsufficientStock},
		{UnknownSKU(`'; DROP TABLE stock;--`), `stockguard: unknown sku: "'; DROP TABLE stock;--"`, stockguard.ErrUnknownSKU},
		{UnknownOrder("order-1"), `stockguard: unknown order: "order-1"`, stockguard.ErrUnknownOrder},
		{Closed("order-1", stockguard.OrderReturned), `stockguard: order closed: "order-1" is returned`, stockguard.ErrOrderClosed},
		{Mismatch("order-1", "Restock"), `stockguard: order mismatch: "order-1" was applied by Restock`, stockguard.ErrOrderMismatch},
		{Mismatch("order-1", ""), `stockguard: order mismatch: "order-1" was applied by another call`, stockguard.ErrOrderMismatch},
	} {
		if tc.err.Error() != tc.want {
			t.Errorf("text %q, want %q", tc.err, tc.want)
		}
		if strategy.Contract(tc.err) != tc.is {
			t.Errorf("%q matches %v, want %v", tc.err, strategy.Contract(tc.err), tc.is)
		}
		// A strategy's Wrap leaves the text as it is, also wrapped once more.
		if got := Wrap(tc.err, "redislock: decrement %q", "hot-sku"); got.Error() != tc.want || !errors.Is(got, tc.is) {
			t.Errorf("Wrap(%q) = %q, want it unchanged", tc.err, got)
		}
		if got := Wrap(Wrap(tc.err, "a"), "b"); got.Error() != tc.want {
			t.Errorf("Wrap(Wrap(%q)) = %q, want it unchanged", tc.err, got)
		}
	}
}

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
