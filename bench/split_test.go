package bench

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"testing"
	"time"
)

// runSplit stocks t for w, runs it as shares of the given worker counts
// concurrently, each Part through JSON as between processes, and finishes.
func runSplit(t *testing.T, target Target, w Workload, shares ...int) *Result {
	t.Helper()
	ctx := t.Context()
	st, err := Stock(ctx, target, nil, w)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close(context.Background()) })
	parts := make([]*Part, len(shares))
	errs := make([]error, len(shares))
	var wg sync.WaitGroup
	first := 0
	for i, n := range shares {
		sh, err := Attach(ctx, target, nil, w, st.Namespace(), first, n)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { sh.Close() })
		first += n
		wg.Go(func() {
			p, err := sh.Run(ctx)
			if err != nil {
				errs[i] = err
				return
			}
			b, err := json.Marshal(p)
			if err != nil {
				errs[i] = err
				return
			}
			parts[i] = new(Part)
			errs[i] = json.Unmarshal(b, parts[i])
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	r, err := st.Finish(ctx, parts)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func TestStocked_Finish_mergesShares(t *testing.T) {
	w := opsWorkload(6, 6_000)
	w.SKUs, w.QtyMax = 3, 2
	r := runSplit(t, sharedFakeTarget("fake", faultUnknown), w, 2, 3, 1)
	wantSound(t, r, false) // unknown outcomes, merged from every share
	if r.Audit.Unresolved != r.Audit.Unknown || r.Audit.Oversold+r.Audit.Lost != 0 {
		t.Errorf("audit %+v, want every unknown outcome unresolved, nothing else", r.Audit)
	}
	if r.Attempts != 6_000 || r.Workload.Workers != 6 {
		t.Errorf("attempts %d over %d workers, want 6000 over 6", r.Attempts, r.Workload.Workers)
	}
	a := r.Audit
	if a.Gone != a.Acked+a.UnknownUnits || a.Unknown == 0 || r.Errors["outcome-unknown"] != a.Unknown {
		t.Errorf("audit %+v, errors %v", a, r.Errors)
	}
	if r.Elapsed <= 0 || r.Throughput <= 0 || r.Latency.P50 <= 0 || r.Latency.Max < r.Latency.P99 {
		t.Errorf("elapsed %v throughput %v latency %+v", r.Elapsed, r.Throughput, r.Latency)
	}
}

func TestStocked_Finish_flashSoldOutAcrossShares(t *testing.T) {
	w := flashWorkload(4, 300)
	r := runSplit(t, sharedFakeTarget("fake", faultNone), w, 2, 2)
	wantSound(t, r, true)
	if !r.SoldOut || r.Units != 300 || r.SellOut <= 0 {
		t.Errorf("sold out %v after %v, %d units", r.SoldOut, r.SellOut, r.Units)
	}
}

// TestStocked_Finish_localLockCaughtAcrossShares: a lock of the instance's
// own is sound as one share of one instance and oversells as two.
func TestStocked_Finish_localLockCaughtAcrossShares(t *testing.T) {
	w := opsWorkload(4, 20_000)
	w.Instances = 1
	wantSound(t, runSplit(t, sharedFakeTarget("local-lock", faultLocalMutex), w, 4), true)
	// The fake makes the two shares' first calls overlap: the lock is
	// caught on a quiet machine and a loaded one alike.
	if r := runSplit(t, sharedFakeTarget("local-lock", faultLocalMutexAcross), w, 2, 2); r.Sound() || r.Audit.Oversold == 0 {
		t.Errorf("two shares: audit %+v, want oversold", r.Audit)
	}
}

func TestStock_refuses(t *testing.T) {
	checkout := opsWorkload(2, 10)
	checkout.Shape = Checkout
	for _, tc := range []struct {
		name   string
		target Target
		w      Workload
		want   error
	}{
		{"no Attach", fakeTarget("fake", faultNone), opsWorkload(2, 10), ErrSkipped},
		{"checkout", sharedFakeTarget("fake", faultNone), checkout, ErrInvalidWorkload},
		{"bad workload", sharedFakeTarget("fake", faultNone), Workload{}, ErrInvalidWorkload},
	} {
		if _, err := Stock(t.Context(), tc.target, nil, tc.w); !errors.Is(err, tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, err, tc.want)
		}
	}
}

func TestAttach_refuses(t *testing.T) {
	target := sharedFakeTarget("fake", faultNone)
	w := opsWorkload(4, 10)
	for _, tc := range []struct {
		name         string
		ns           string
		first, count int
	}{
		{"namespace not Stock's", "x`; DROP TABLE t", 0, 1},
		{"no workers", newNamespace(), 0, 0},
		{"beyond the workload's workers", newNamespace(), 3, 2},
		{"negative first", newNamespace(), -1, 2},
	} {
		if _, err := Attach(t.Context(), target, nil, w, tc.ns, tc.first, tc.count); !errors.Is(err, ErrInvalidShare) {
			t.Errorf("%s: %v, want ErrInvalidShare", tc.name, err)
		}
	}
}

func TestStocked_Finish_refusesPartsThatDoNotCoverTheWorkers(t *testing.T) {
	target := sharedFakeTarget("fake", faultNone)
	w := opsWorkload(4, 400)
	w.Duration = time.Second
	ctx := t.Context()
	st, err := Stock(ctx, target, nil, w)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close(ctx)
	part := func(first, count int) *Part {
		sh, err := Attach(ctx, target, nil, w, st.Namespace(), first, count)
		if err != nil {
			t.Fatal(err)
		}
		defer sh.Close()
		p, err := sh.Run(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	a, b := part(0, 2), part(1, 3)
	for name, parts := range map[string][]*Part{"missing": {a}, "overlapping": {a, b}} {
		if _, err := st.Finish(ctx, parts); !errors.Is(err, ErrInvalidShare) {
			t.Errorf("%s: %v, want ErrInvalidShare", name, err)
		}
	}
}
