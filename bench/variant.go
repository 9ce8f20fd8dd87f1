package bench

import (
	"context"
	"maps"
	"slices"
)

// Variant returns t on other backends of the same protocol — the same
// strategy on TiDB instead of MySQL, on Valkey instead of Redis — named
// name: each backend that rename maps is replaced by its image, in Needs
// and in the Servers t's Open and Attach get. The variant runs only when asked for
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
	renamed := func(s Servers) Servers {
		s = maps.Clone(s)
		for from, to := range rename {
			s[from] = s[to]
		}
		return s
	}
	open := t.Open
	v.Open = func(ctx context.Context, s Servers, ns string) (*Store, error) { return open(ctx, renamed(s), ns) }
	if attach := t.Attach; attach != nil {
		v.Attach = func(ctx context.Context, s Servers, ns string) (*Store, error) { return attach(ctx, renamed(s), ns) }
	}
	return v
}
