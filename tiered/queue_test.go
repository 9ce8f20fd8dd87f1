package tiered

import (
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/stockguard/stockguard"
)

// TestParseEntry reads the entries the front's scripts append, a field per
// line, and refuses what is not one.
func TestParseEntry(t *testing.T) {
	cases := []struct {
		name   string
		values map[string]any
		op     Op
		lines  []stockguard.Line
		left   map[string]int64
	}{
		{"take", map[string]any{"o": "T", "i": "o1", "=b": "1", "=a": "2", "^a": "98", "^b": "99"},
			OpTake, []stockguard.Line{{SKU: "a", Qty: 2}, {SKU: "b", Qty: 1}}, map[string]int64{"a": 98, "b": 99}},
		{"return", map[string]any{"o": "R", "i": "o1", "=a": "2"},
			OpReturn, []stockguard.Line{{SKU: "a", Qty: 2}}, nil},
		{"no lines", map[string]any{"o": "T", "i": "o1"}, 0, nil, nil},
		{"no id", map[string]any{"o": "T", "=a": "2"}, 0, nil, nil},
		{"another op", map[string]any{"o": "X", "i": "o1", "=a": "2"}, 0, nil, nil},
		{"a qty that is no number", map[string]any{"o": "T", "i": "o1", "=a": "x"}, 0, nil, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			e := parseEntry(redis.XMessage{ID: "1700000000123-4", Values: c.values})
			if e.Op != c.op {
				t.Fatalf("op %q, want %q (%v)", e.Op, c.op, e)
			}
			if c.op == 0 {
				return
			}
			if e.Order != "o1" || !slices.Equal(e.Lines, c.lines) || !maps.Equal(e.Left, c.left) {
				t.Errorf("%s lines %v left %v, want o1 lines %v left %v", e.Order, e.Lines, e.Left, c.lines, c.left)
			}
			if !e.Appended.Equal(time.UnixMilli(1700000000123)) {
				t.Errorf("appended %v, want the ID's milliseconds", e.Appended)
			}
		})
	}
}
