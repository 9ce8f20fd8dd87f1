package strategy

import (
	"cmp"
	"slices"

	"github.com/stockguard/stockguard"
)

// SortedLines returns a copy of lines in SKU order: the order in which
// implementations lock rows (so two carts never deadlock) and OrderInfo
// lists them.
func SortedLines(lines []stockguard.Line) []stockguard.Line {
	out := slices.Clone(lines)
	slices.SortFunc(out, func(a, b stockguard.Line) int { return cmp.Compare(a.SKU, b.SKU) })
	return out
}

// SameLines reports whether a and b, each in any order, hold the same lines.
func SameLines(a, b []stockguard.Line) bool {
	if len(a) != len(b) {
		return false
	}
	return slices.Equal(SortedLines(a), SortedLines(b))
}
