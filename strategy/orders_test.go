package strategy_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stockguard/stockguard"
	"github.com/stockguard/stockguard/strategy"
)

func TestValidateHold(t *testing.T) {
	ok := []stockguard.Line{{SKU: "a", Qty: 1}}
	many := make([]stockguard.Line, stockguard.MaxLines+1)
	for i := range many {
		many[i] = stockguard.Line{SKU: fmt.Sprintf("sku-%d", i), Qty: 1}
	}
	for _, tc := range []struct {
		name  string
		id    string
		ttl   time.Duration
		lines []stockguard.Line
		ok    bool
	}{
		{"valid", "o-1", time.Second, ok, true},
		{"max id", strings.Repeat("i", 128), time.Second, ok, true},
		{"min ttl", "o", time.Millisecond, ok, true},
		{"max ttl", "o", 7 * 24 * time.Hour, ok, true},
		{"max lines", "o", time.Second, many[:64], true},
		{"empty id", "", time.Second, ok, false},
		{"long id", strings.Repeat("i", 129), time.Second, ok, false},
		{"invalid utf-8 id", "o\xff", time.Second, ok, false},
		{"control id", "o\n", time.Second, ok, false},
		{"no lines", "o", time.Second, nil, false},
		{"65 lines", "o", time.Second, many, false},
		{"duplicate sku", "o", time.Second, []stockguard.Line{{SKU: "a", Qty: 1}, {SKU: "a", Qty: 2}}, false},
		{"bad sku", "o", time.Second, []stockguard.Line{{SKU: "", Qty: 1}}, false},
		{"zero qty", "o", time.Second, []stockguard.Line{{SKU: "a", Qty: 0}}, false},
		{"huge qty", "o", time.Second, []stockguard.Line{{SKU: "a", Qty: stockguard.MaxQty + 1}}, false},
		{"zero ttl", "o", 0, ok, false},
		{"negative ttl", "o", -time.Second, ok, false},
		{"ttl over 7 days", "o", 7*24*time.Hour + time.Nanosecond, ok, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := strategy.ValidateHold(tc.id, tc.ttl, tc.lines)
			if tc.ok != (err == nil) || (err != nil && !errors.Is(err, stockguard.ErrInvalidRequest)) {
				t.Fatalf("ValidateHold = %v, want ok=%v", err, tc.ok)
			}
		})
	}
}

func TestContract_exactlyOne(t *testing.T) {
	for _, target := range strategy.ContractErrors() {
		if got := strategy.Contract(target); got != target {
			t.Errorf("Contract(%v) = %v", target, got)
		}
	}
	if strategy.Contract(errors.New("driver: boom")) != nil || strategy.IsContract(nil) {
		t.Error("an error outside the contract, or nil, matched")
	}
}

func TestCanceled_nilContext(t *testing.T) {
	//lint:ignore SA1012 a nil context is the input under test
	if err := strategy.Canceled(nil); !errors.Is(err, stockguard.ErrInvalidRequest) { //nolint:staticcheck
		t.Fatalf("Canceled(nil) = %v, want ErrInvalidRequest", err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if err := strategy.Canceled(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("Canceled(ended) = %v", err)
	}
}

func TestSortedLines(t *testing.T) {
	in := []stockguard.Line{{SKU: "b", Qty: 1}, {SKU: "a", Qty: 2}}
	got := strategy.SortedLines(in)
	if got[0].SKU != "a" || in[0].SKU != "b" || !strategy.SameLines(in, got) || strategy.SameLines(in, got[:1]) {
		t.Fatalf("SortedLines(%v) = %v", in, got)
	}
}
