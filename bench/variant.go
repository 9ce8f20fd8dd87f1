package bench

import (
	"context"
	"maps"
	"slices"
)

// Variant returns t on other backends of the same protocol — the same
// strategy on TiDB instead of MySQL, on Valkey instead of Redis — named
// name: each backend that rename maps is replaced by its image, in Needs
// and in the Servers t's Open gets. The variant runs only when asked for
// by name (OnRequest), so that a default run needs no server of those
// engines.
func Variant(t Target, name string, rename map[string]string) Target {
	v := t
	v.Name, v.OnRequest = name, true
	v.Needs = slices.Clone(t.Needs)
	for i, n := range v.Needs {
		if to, ok := rename[n]; ok {
			v.Needs[i] = to
		}
	}
	open := t.Open
	v.Open = func(ctx context.Context, s Servers, ns string) (*Store, error) {
		s = maps.Clone(s)
		for from, to := range rename {
			s[from] = s[to]
		}
		return open(ctx, s, ns)
	}
	return v
}
