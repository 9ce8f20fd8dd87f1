package strategy_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/stockguard/stockguard"
	"github.com/stockguard/stockguard/strategy"
)

func TestValidate(t *testing.T) {
	tests := []struct {
		name string
		sku  string
		qty  int64
		ok   bool
	}{
		{"plain", "sku-1", 1, true},
		{"max qty", "sku-1", stockguard.MaxQty, true},
		{"64 bytes", strings.Repeat("x", 64), 1, true},
		{"64 bytes of runes", strings.Repeat("é", 32), 1, true},
		{"sql lookalike", "'; DROP TABLE stock;--", 1, true},
		{"redis pattern", "*", 1, true},
		{"hash tag", "{x}", 1, true},
		{"space", "a b", 1, true},
		{"empty", "", 1, false},
		{"65 bytes", strings.Repeat("x", 65), 1, false},
		{"66 bytes in 33 runes", strings.Repeat("é", 33), 1, false},
		{"invalid utf-8", "\xff", 1, false},
		{"truncated rune", "a\xe2\x82", 1, false},
		{"newline", "a\nb", 1, false},
		{"nul", "a\x00", 1, false},
		{"del", "\x7f", 1, false},
		{"c1 control", "\u0085", 1, false},
		{"zero qty", "sku", 0, false},
		{"negative qty", "sku", -5, false},
		{"qty above MaxQty", "sku", stockguard.MaxQty + 1, false},
		{"min int64", "sku", -1 << 63, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := strategy.Validate(tt.sku, tt.qty)
			if tt.ok && err != nil {
				t.Fatalf("Validate(%q, %d) = %v, want nil", tt.sku, tt.qty, err)
			}
			if !tt.ok && !errors.Is(err, stockguard.ErrInvalidRequest) {
				t.Fatalf("Validate(%q, %d) = %v, want ErrInvalidRequest", tt.sku, tt.qty, err)
			}
		})
	}
}

func TestValidateLevel(t *testing.T) {
	for _, tt := range []struct {
		qty int64
		ok  bool
	}{{0, true}, {stockguard.MaxQty, true}, {-1, false}, {stockguard.MaxQty + 1, false}} {
		if err := strategy.ValidateLevel(tt.qty); (err == nil) != tt.ok || (err != nil && !errors.Is(err, stockguard.ErrInvalidRequest)) {
			t.Errorf("ValidateLevel(%d) = %v, want ok=%v", tt.qty, err, tt.ok)
		}
	}
}
