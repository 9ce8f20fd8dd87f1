package mysqllock

import (
	"slices"
	"testing"
)

// bind writes the strings the driver would escape as hexadecimal literals
// and leaves the other arguments, and every placeholder inside quotes,
// backticks or a string, to the driver; inline writes every argument.
func TestBind_escapableStringsBecomeHexLiterals(t *testing.T) {
	const q = "SELECT `a?b`, '?', ? FROM t WHERE sku = ? AND id IN (?, ?) AND n = ?"
	args := []any{"plain", "中' OR 1#", "a\\b", []byte("ok"), int64(7)}
	gotQ, gotArgs := bind(q, args)
	wantQ := "SELECT `a?b`, '?', ? FROM t WHERE sku = _utf8mb4 X'e4b8ad27204f52203123' AND id IN (_utf8mb4 X'615c62', ?) AND n = ?"
	if gotQ != wantQ || !slices.EqualFunc(gotArgs, []any{"plain", []byte("ok"), int64(7)}, func(x, y any) bool {
		return literalOf(x) == literalOf(y)
	}) {
		t.Fatalf("bind = %q %v, want %q", gotQ, gotArgs, wantQ)
	}
	if q2, a2 := bind("SELECT ?", []any{"safe"}); q2 != "SELECT ?" || len(a2) != 1 {
		t.Fatalf("bind of a safe string: %q %v", q2, a2)
	}
	type kind int8
	got := inline("DO ?, ?, ?, ?, ?, ?", []any{"x", "y'", kind(3), nil, []byte{0xff}, true})
	if want := "DO 'x', _utf8mb4 X'7927', 3, NULL, X'ff', TRUE"; got != want {
		t.Fatalf("inline = %q, want %q", got, want)
	}
}

// literalOf is a as inline writes it.
func literalOf(a any) string { return inline("?", []any{a}) }
