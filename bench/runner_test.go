package bench

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stockguard/stockguard"
)

// opsWorkload is a quick steady workload on one hot SKU ending after ops
// measured requests, without the drain SKU, so that every request is for
// one unit of the hot SKU and the counts are exact.
func opsWorkload(workers int, ops int64) Workload {
	w := defaultOps(workers, ops)
	w.Drain = 0
	return w
}

// defaultOps is the default workload ending after ops measured requests
// rather than after a duration: a fixed count of requests, each worker's
// drawn from its own seeded sequence, so a bug keyed on a call counter
// shows in every run.
func defaultOps(workers int, ops int64) Workload {
	w := DefaultWorkload()
	w.Workers, w.Ops, w.Duration, w.Warmup = workers, ops, 0, 0
	return w
}

func flashWorkload(workers int, stock int64) Workload {
	w := DefaultWorkload()
	w.Shape, w.Workers, w.Stock = Flash, workers, stock
	w.QtyMin, w.QtyMax = 1, 3
	w.Duration, w.Warmup = 3*time.Second, 50*time.Millisecond
	return w
}

func TestRun_audit(t *testing.T) {
	for _, tc := range []struct {
		name   string
		target Target
		w      Workload
		check  func(t *testing.T, r *Result)
	}{
		{"reference steady", memTarget(), opsWorkload(8, 20_000), func(t *testing.T, r *Result) {
			wantSound(t, r, true)
			if r.Attempts != 20_000 || r.Successes != 20_000 || r.Units != 20_000 {
				t.Errorf("attempts %d successes %d units %d, want 20000 each", r.Attempts, r.Successes, r.Units)
			}
			if a := r.Audit; a.Acked != 20_000 || a.Gone != 20_000 || a.Initial != DefaultSteadyStock {
				t.Errorf("audit %+v, want 20000 acked and gone of %d", a, int64(DefaultSteadyStock))
			}
			if r.Throughput <= 0 || r.Latency.P50 <= 0 || r.Latency.Max < r.Latency.P999 || r.Latency.P999 < r.Latency.P50 {
				t.Errorf("throughput %v, latency %+v", r.Throughput, r.Latency)
			}
		}},
		{"reference flash", memTarget(), flashWorkload(8, 500), func(t *testing.T, r *Result) {
			wantSound(t, r, true)
			if !r.SoldOut || r.SellOut <= 0 || r.SellOut > r.Elapsed {
				t.Errorf("sold out %v after %v of %v", r.SoldOut, r.SellOut, r.Elapsed)
			}
			// The sale SKU ends with less than QtyMin = 1 unit; the warm-up SKU keeps almost all.
			if r.Units != 500 || r.Errors["insufficient"] == 0 {
				t.Errorf("units %d (want 500), refusals %d", r.Units, r.Errors["insufficient"])
			}
			if a := r.Audit; a.Initial != 500+DefaultSteadyStock || a.Final != a.Initial-a.Acked {
				t.Errorf("audit %+v", a)
			}
		}},
		{"lost updates", fakeTarget("racy", faultRacy), opsWorkload(8, 50_000), func(t *testing.T, r *Result) {
			wantSound(t, r, false)
			if r.Audit.Oversold == 0 || r.Audit.Lost != 0 {
				t.Errorf("oversold %d lost %d, want oversold only", r.Audit.Oversold, r.Audit.Lost)
			}
		}},
		{"applied but refused", fakeTarget("liar", faultLie), opsWorkload(4, 7_000), func(t *testing.T, r *Result) {
			wantSound(t, r, false)
			if r.Audit.Lost != r.Errors["contention"] || r.Audit.Lost == 0 || r.Audit.Oversold != 0 {
				t.Errorf("lost %d oversold %d, want lost = %d contention errors", r.Audit.Lost, r.Audit.Oversold, r.Errors["contention"])
			}
		}},
		{"unknown outcomes", fakeTarget("unknown", faultUnknown), opsWorkload(4, 7_000), func(t *testing.T, r *Result) {
			// No fault is injected: an unknown outcome is a finding, even
			// one that took its units (nothing tells the run it did).
			wantSound(t, r, false)
			if a := r.Audit; a.Unknown != 1_000 || a.UnknownUnits != 1_000 || a.Unresolved != 1_000 || r.Errors["outcome-unknown"] != 1_000 || a.Lost != 0 {
				t.Errorf("audit %+v, errors %v: want 1000 unresolved, nothing lost", a, r.Errors)
			}
		}},
		{"Stock disagrees with the backend", fakeTarget("stock-lies", faultStockLies), opsWorkload(2, 1_000), func(t *testing.T, r *Result) {
			wantSound(t, r, false)
			if r.Audit.Mismatches != 1 || r.Audit.Oversold != 1 || !r.Audit.Raw || r.Audit.RawFinal+1 != r.Audit.Final {
				t.Errorf("audit %+v, want one mismatch costing one oversold unit", r.Audit)
			}
		}},
		{"refusal while stock remains", fakeTarget("false-refusal", faultFalseRefusal), opsWorkload(2, 700), func(t *testing.T, r *Result) {
			wantSound(t, r, false)
			if r.Audit.FalseRefusals != 1 || r.Audit.Oversold != 0 || r.Audit.Lost != 0 {
				t.Errorf("audit %+v, want one false refusal", r.Audit)
			}
		}},
		{"below zero", fakeTarget("no-check", faultNoCheck), func() Workload {
			w := flashWorkload(4, 100)
			w.Duration = 100 * time.Millisecond
			return w
		}(), func(t *testing.T, r *Result) {
			wantSound(t, r, false)
			if a := r.Audit; a.Oversold <= 0 || a.Lost != 0 {
				t.Errorf("audit %+v, want oversold only", a)
			}
			if r.SoldOut {
				t.Error("reported sold out, but it never refused")
			}
		}},
		{"errors outside the contract", fakeTarget("other", faultOther), opsWorkload(2, 700), func(t *testing.T, r *Result) {
			wantSound(t, r, true)
			if r.Errors["other"] != 100 || !slices.Equal(r.OtherErrors, []string{errWeird.Error()}) {
				t.Errorf("errors %v, samples %q", r.Errors, r.OtherErrors)
			}
		}},
		{"retries", fakeTarget("retrying", faultSlowRetries), opsWorkload(2, 10_000), func(t *testing.T, r *Result) {
			wantSound(t, r, true)
			if r.RetriesPerOp < 0.9 || r.RetriesPerOp > 1.01 {
				t.Errorf("retries/op %v, want about 1", r.RetriesPerOp)
			}
		}},
		{"more workers than requests", memTarget(), opsWorkload(8, 3), func(t *testing.T, r *Result) {
			wantSound(t, r, true)
			if r.Attempts != 3 || r.Audit.Acked != 3 {
				t.Errorf("attempts %d, acked %d, want 3", r.Attempts, r.Audit.Acked)
			}
		}},
		{"shared tallies over many SKUs", memTarget(), func() Workload {
			w := opsWorkload(64, 100_000)
			w.SKUs, w.Skew = 100_000, Skew{Zipf: 1.2}
			return w
		}(), func(t *testing.T, r *Result) {
			wantSound(t, r, true)
			if r.Audit.Acked != 100_000 {
				t.Errorf("acked %d", r.Audit.Acked)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, err := Run(t.Context(), tc.target, nil, tc.w)
			if err != nil {
				t.Fatal(err)
			}
			if r.Target != tc.target.Name || r.Workload != tc.w || r.Interrupted {
				t.Errorf("result of %q, workload %+v, interrupted %v", r.Target, r.Workload, r.Interrupted)
			}
			tc.check(t, r)
		})
	}
}

func wantSound(t *testing.T, r *Result, sound bool) {
	t.Helper()
	if r.Sound() != sound {
		t.Errorf("sound = %v, want %v; audit %+v", r.Sound(), sound, r.Audit)
	}
}

func TestRun_interrupted(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	w := DefaultWorkload()
	w.Duration = time.Hour // only the interrupt can end it within the hang guard
	time.AfterFunc(300*time.Millisecond, cancel)
	type outcome struct {
		r   *Result
		err error
	}
	done := make(chan outcome, 1)
	go func() {
		r, err := Run(ctx, memTarget(), nil, w)
		done <- outcome{r, err}
	}()
	var o outcome
	select {
	case o = <-done:
	case <-time.After(5 * time.Minute): // a hang guard only
		t.Fatal("the interrupt did not stop the run")
	}
	if !errors.Is(o.err, context.Canceled) {
		t.Fatalf("err = %v, want context.Canceled", o.err)
	}
	if r := o.r; r == nil || !r.Interrupted || !r.Sound() {
		t.Fatalf("result %+v", r)
	}
}

func TestRun_refusesBadInput(t *testing.T) {
	w := DefaultWorkload()
	w.Workers = 0
	if _, err := Run(t.Context(), memTarget(), nil, w); !errors.Is(err, ErrInvalidWorkload) {
		t.Errorf("0 workers: %v", err)
	}
	needy := memTarget()
	needy.Needs = []string{"mysql", "redis"}
	if _, err := Run(t.Context(), needy, nil, DefaultWorkload()); !errors.Is(err, ErrMissingBackend) {
		t.Errorf("no backends: %v", err)
	}
}

func TestRun_progress(t *testing.T) {
	w := DefaultWorkload()
	w.Duration, w.Warmup = 300*time.Millisecond, 100*time.Millisecond
	var got []float64
	if _, err := Run(t.Context(), memTarget(), nil, w, WithProgress(func(f float64) { got = append(got, f) })); err != nil {
		t.Fatal(err)
	}
	if len(got) < 2 || got[len(got)-1] != 1 || !slices.IsSorted(got) {
		t.Errorf("progress %v, want a rising series ending at 1", got)
	}
}

// TestRun_noAllocationPerRequest runs the no-op target for 10× more
// requests and checks that the heap allocations do not grow with them.
func TestRun_noAllocationPerRequest(t *testing.T) {
	allocs := func(ops int64) uint64 {
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		if _, err := Run(t.Context(), noopTarget(), nil, opsWorkload(64, ops)); err != nil {
			t.Fatal(err)
		}
		runtime.ReadMemStats(&after)
		return after.Mallocs - before.Mallocs
	}
	small, large := allocs(100_000), allocs(1_000_000)
	if large > small+2_000 {
		t.Errorf("%d allocations for 100k requests, %d for 1M: the hot path allocates", small, large)
	}
}

func TestWorker_zipfPicksHotSKUs(t *testing.T) {
	w := opsWorkload(1, 1)
	w.SKUs, w.Skew = 1000, Skew{Zipf: 1.1}
	wk := newWorker(newRun(w), 0, noop{}, -1)
	counts := make([]int, w.SKUs)
	for range 100_000 {
		counts[wk.pick()]++
	}
	if counts[0] < 10*counts[100] || counts[0] < 10_000 {
		t.Errorf("SKU 0 drawn %d times, SKU 100 %d times: not skewed", counts[0], counts[100])
	}
	w.Skew = Uniform
	wk = newWorker(newRun(w), 0, noop{}, -1)
	clear(counts)
	for range 100_000 {
		counts[wk.pick()]++
	}
	if lo, hi := slices.Min(counts), slices.Max(counts); lo < 50 || hi > 160 {
		t.Errorf("uniform draws range %d…%d per SKU, want about 100", lo, hi)
	}
}

func TestWorkload_Validate(t *testing.T) {
	for _, tc := range []struct {
		name string
		edit func(*Workload)
		bad  string // substring of the error, "" for valid
	}{
		{"default", func(*Workload) {}, ""},
		{"flash", func(w *Workload) { w.Shape = Flash }, ""},
		{"ops only", func(w *Workload) { w.Duration, w.Ops = 0, 10 }, ""},
		{"no skus", func(w *Workload) { w.SKUs = 0 }, "SKUs"},
		{"too many skus", func(w *Workload) { w.SKUs = MaxSKUs + 1 }, "SKUs"},
		{"flat zipf", func(w *Workload) { w.Skew = Skew{Zipf: 1} }, "zipf"},
		{"negative stock", func(w *Workload) { w.Stock = -1 }, "stock"},
		{"huge stock", func(w *Workload) { w.Stock, w.SKUs = 1<<52, 1000 }, "too large"},
		{"qty 0", func(w *Workload) { w.QtyMin = 0 }, "qty"},
		{"qty range upside down", func(w *Workload) { w.QtyMin, w.QtyMax = 3, 2 }, "qty"},
		{"no workers", func(w *Workload) { w.Workers = 0 }, "workers"},
		{"too many workers", func(w *Workload) { w.Workers = MaxWorkers + 1 }, "workers"},
		{"no instances", func(w *Workload) { w.Instances = 0 }, "instances"},
		{"negative warm-up", func(w *Workload) { w.Warmup = -1 }, "negative"},
		{"no end", func(w *Workload) { w.Duration, w.Ops = 0, 0 }, "neither"},
		{"bad shape", func(w *Workload) { w.Shape = 7 }, "shape"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := DefaultWorkload()
			tc.edit(&w)
			err := w.Validate()
			switch {
			case tc.bad == "" && err != nil:
				t.Errorf("unexpected error %v", err)
			case tc.bad != "" && (!errors.Is(err, ErrInvalidWorkload) || !strings.Contains(err.Error(), tc.bad)):
				t.Errorf("error %v, want ErrInvalidWorkload mentioning %q", err, tc.bad)
			}
		})
	}
}

func TestParse(t *testing.T) {
	for _, tc := range []struct {
		in      string
		skew    Skew
		skewErr bool
	}{
		{"uniform", Uniform, false}, {"zipf", Skew{Zipf: DefaultZipf}, false}, {"ZIPF:1.5", Skew{Zipf: 1.5}, false},
		{"zipf:1", Skew{}, true}, {"zipf:x", Skew{}, true}, {"zipf:+Inf", Skew{}, true}, {"normal", Skew{}, true}, {"uniform:2", Skew{}, true},
	} {
		got, err := ParseSkew(tc.in)
		if (err != nil) != tc.skewErr || got != tc.skew {
			t.Errorf("ParseSkew(%q) = %v, %v", tc.in, got, err)
		}
		if err == nil {
			if back, _ := ParseSkew(got.String()); back != got {
				t.Errorf("ParseSkew(%q.String()) = %v", got, back)
			}
		}
	}
	for _, tc := range []struct {
		in     string
		lo, hi int64
		bad    bool
	}{
		{"1", 1, 1, false}, {"1-3", 1, 3, false}, {" 2 - 5 ", 2, 5, false},
		{"0", 0, 0, true}, {"3-2", 0, 0, true}, {"x", 0, 0, true}, {"1-", 0, 0, true}, {"-1", 0, 0, true}, {"9007199254740992", 0, 0, true},
	} {
		lo, hi, err := ParseQty(tc.in)
		if (err != nil) != tc.bad || lo != tc.lo || hi != tc.hi {
			t.Errorf("ParseQty(%q) = %d, %d, %v", tc.in, lo, hi, err)
		}
	}
	for in, want := range map[string]Shape{"steady": Steady, "flash": Flash, "Flash-Sale": Flash} {
		if got, err := ParseShape(in); err != nil || got != want {
			t.Errorf("ParseShape(%q) = %v, %v", in, got, err)
		}
	}
	if _, err := ParseShape("bursty"); err == nil {
		t.Error("ParseShape(bursty) succeeded")
	}
}

func TestClassify(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want Kind
	}{
		{nil, KindOK},
		{fmt.Errorf("x: %w", stockguard.ErrInsufficientStock), KindInsufficient},
		{stockguard.ErrUnknownSKU, KindUnknownSKU},
		{stockguard.ErrInvalidRequest, KindInvalid},
		{stockguard.ErrUnavailable, KindUnavailable},
		{fmt.Errorf("o: %w", stockguard.ErrOrderClosed), KindOrderClosed},
		// Sent, then abandoned: the units may be gone.
		{errors.Join(context.Canceled, fmt.Errorf("w: %w", stockguard.ErrOutcomeUnknown)), KindOutcomeUnknown},
		{context.DeadlineExceeded, KindCanceled},
		{errWeird, KindOther},
	} {
		if got := Classify(tc.err); got != tc.want {
			t.Errorf("Classify(%v) = %v, want %v", tc.err, got, tc.want)
		}
	}
	for k := range numKinds + 1 {
		if k.String() == "" {
			t.Errorf("kind %d has no name", k)
		}
	}
}
