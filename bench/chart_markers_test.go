package bench

import (
	"image/color"
	"slices"
	"testing"
)

// TestColourFor_defaultRunDistinct: every line of a default run has a
// colour of its own (the issue: 16 lines shared 13 colours), and each
// on-request target differs from its registry neighbours.
func TestColourFor_defaultRunDistinct(t *testing.T) {
	seen := map[color.RGBA]string{}
	defaults := 0
	for _, tg := range Targets() {
		if tg.OnRequest {
			continue
		}
		defaults++
		c := colourFor(tg.Name, false)
		if other, ok := seen[c]; ok && defaults <= len(palette) {
			t.Errorf("%s and %s, both in a default run, share a colour", tg.Name, other)
		}
		seen[c] = tg.Name
	}
	all := Targets()
	for i := 1; i < len(all); i++ {
		if colourFor(all[i].Name, false) == colourFor(all[i-1].Name, false) {
			t.Errorf("neighbours %s and %s share a colour", all[i-1].Name, all[i].Name)
		}
	}
	if defaults < 2 {
		t.Errorf("%d default targets registered in this test binary", defaults)
	}
}

// TestMarkerNotes: the note under the legend names the store of each
// marker charted, once, in the markers' order.
func TestMarkerNotes(t *testing.T) {
	got := markerNotes([]string{"redis", "mysql", "postgres", "tidb", "redis", "memory"})
	want := []string{
		"one colour per strategy; marker = store holding the stock",
		"filled dots: mysql, tidb   triangles: postgres   rings: redis   squares: memory",
	}
	if !slices.Equal(got, want) {
		t.Errorf("markerNotes = %q, want %q", got, want)
	}
	if got := markerNotes(nil); got != nil {
		t.Errorf("markerNotes(nil) = %q, want nil", got)
	}
}
