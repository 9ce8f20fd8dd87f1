package bench

import (
	"context"
	"fmt"
	"maps"
	"regexp"
	"time"
)

// A store can have work of its own beside the app instances: tiered's
// consumer, applying the stream its front writes to its back. A single-
// process run leaves it to the store (a Store from Open runs one copy);
// a split run (Stock) hands it off, and the caller runs copies where a
// deployment would — in processes of their own (AttachConsumer) — and
// adds their figures to the Result (MergeStats).

// Consumer is one copy of a store's own work (Store.Consume).
type Consumer struct {
	// Name tells the copy from the others sharing the work; unique among
	// them.
	Name string
	// ClaimIdle is how long work a copy took may stay unfinished before
	// another copy takes it over (a copy that died); 0 means the target's
	// default (tiered.DefaultClaimIdle).
	ClaimIdle time.Duration
}

// Consumes reports whether the store has work of its own that Stock
// handed off: the caller must run copies of it (AttachConsumer) until
// Finish has audited the store, or the audit waits for work nobody does.
func (st *Stocked) Consumes() bool { return st.store.Consume != nil }

// AttachConsumer reaches the store that Stock opened in namespace ns, from
// another process, on servers s opened there, and returns a function that
// runs copy c of the store's own work until its ctx ends and returns the
// copy's figures, for MergeStats.
//
// It returns an error wrapping ErrInvalidShare (a namespace Stock did not
// make, a copy without a name or with a negative ClaimIdle) or
// ErrMissingBackend before doing anything, one wrapping ErrSkipped when t
// has no Attach or its store has no work of its own, or the error of
// reaching the store.
func AttachConsumer(ctx context.Context, t Target, s Servers, ns string, c Consumer) (func(context.Context) (map[string]float64, error), error) {
	switch {
	case !namespaceRE.MatchString(ns):
		return nil, fmt.Errorf("%w: namespace %q is not one Stock made", ErrInvalidShare, ns)
	case c.Name == "" || c.ClaimIdle < 0:
		return nil, fmt.Errorf("%w: consumer %+v", ErrInvalidShare, c)
	}
	store, err := attach(ctx, t, s, ns)
	if err != nil {
		return nil, err
	}
	if store.Consume == nil {
		return nil, fmt.Errorf("bench: %w: %s has no work of its own to run in a process", ErrSkipped, t.Name)
	}
	return func(ctx context.Context) (map[string]float64, error) { return store.Consume(ctx, c) }, nil
}

// extremeRE matches the figures that MergeStats takes the largest of: a
// maximum or a percentile ("lag_max_ms", "lag_p99_ms", "backlog_max").
var extremeRE = regexp.MustCompile(`(^|_)(max|p[0-9]+)(_|$)`)

// MergeStats adds the figures of copies of a store's own work, one map
// per copy, to res.Stats. Counts and rates add up; a maximum or a
// percentile (a name with "max" or "pNN" between underscores) takes the
// largest copy's — for a percentile an upper bound of the whole's, which
// lies between the copies' least and largest. A figure only one copy has
// (one named after it) is that copy's.
func MergeStats(res *Result, copies ...map[string]float64) {
	if len(copies) == 0 {
		return
	}
	if res.Stats == nil {
		res.Stats = map[string]float64{}
	} else {
		res.Stats = maps.Clone(res.Stats)
	}
	for _, c := range copies {
		for k, v := range c {
			if old, ok := res.Stats[k]; ok && extremeRE.MatchString(k) {
				res.Stats[k] = max(old, v)
			} else {
				res.Stats[k] += v
			}
		}
	}
}
