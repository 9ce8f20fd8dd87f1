package bench

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stockguard/stockguard"
	"github.com/stockguard/stockguard/internal/memstock"
)

// stallInv is memstock that stalls everything once: its stallAt-th
// Decrement holds every other request back for stall, as a server pausing
// (a checkpoint, a failover) would.
type stallInv struct {
	*memstock.Store
	mu      sync.RWMutex
	n       atomic.Int64
	stallAt int64
	stall   time.Duration
}

func (s *stallInv) Decrement(ctx context.Context, sku string, qty int64) error {
	if s.n.Add(1) == s.stallAt {
		s.mu.Lock()
		time.Sleep(s.stall)
		s.mu.Unlock()
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.Store.Decrement(ctx, sku, qty)
}

func stallTarget(stallAt int64, stall time.Duration) Target {
	return Target{Name: "stall", About: "memstock stalling once", Open: func(context.Context, Servers, string) (*Store, error) {
		s := &stallInv{Store: memstock.New(), stallAt: stallAt, stall: stall}
		return &Store{New: func() (stockguard.Inventory, error) { return s, nil }}, nil
	}}
}

// TestRun_openLoopShowsAStall runs the same 100 ms stall closed-loop and
// open-loop: closed-loop, each worker records the one slow request it was
// stuck in and the percentiles hide the stall; open-loop at 4000/s, the
// ~400 requests that should have started during it are late and p99 shows
// it.
func TestRun_openLoopShowsAStall(t *testing.T) {
	const stall = 100 * time.Millisecond
	w := DefaultWorkload()
	w.Workers, w.Duration, w.Warmup = 4, 500*time.Millisecond, 0

	closed, err := Run(t.Context(), stallTarget(400, stall), nil, w)
	if err != nil {
		t.Fatal(err)
	}
	wantSound(t, closed, true)
	// Bounds at half the stall, not at a healthy request's latency: a
	// loaded machine under -race slows every request, never by a stall's
	// worth at p99.
	if closed.Latency.Max < stall || closed.Latency.P99 >= stall/2 {
		t.Errorf("closed-loop: max %v (want ≥ %v), p99 %v (want < %v: the stall hidden)", closed.Latency.Max, stall, closed.Latency.P99, stall/2)
	}

	w.Rate = 4000
	open, err := Run(t.Context(), stallTarget(400, stall), nil, w)
	if err != nil {
		t.Fatal(err)
	}
	wantSound(t, open, true)
	if open.Latency.P99 < 80*time.Millisecond || open.Latency.Max < stall {
		t.Errorf("open-loop: p99 %v (want ≥ 80ms), max %v (want ≥ %v)", open.Latency.P99, open.Latency.Max, stall)
	}
	// The schedule, not the target, sets the pace: 4000/s for 0.5 s (the
	// bounds leave room for a loaded machine's late timers and the drain
	// requests; a closed loop would make orders of magnitude more).
	if open.Attempts < 1600 || open.Attempts > 2400 || open.AttemptRate < 3000 || open.AttemptRate > 5000 {
		t.Errorf("open-loop: %d attempts at %.0f/s, want about 2000 at 4000/s", open.Attempts, open.AttemptRate)
	}
	if open.Latency.P50 >= stall/2 {
		t.Errorf("open-loop: p50 %v, want well under the stall", open.Latency.P50)
	}
}

// TestRun_openLoopStopsSleepingWorkers: at 1 request per hour per worker
// the run still ends at its duration, not at the workers' next start.
func TestRun_openLoopStopsSleepingWorkers(t *testing.T) {
	w := DefaultWorkload()
	w.Workers, w.Duration, w.Warmup, w.Rate = 4, 100*time.Millisecond, 0, 4.0/3600
	type outcome struct {
		r   *Result
		err error
	}
	done := make(chan outcome, 1)
	go func() {
		r, err := Run(t.Context(), memTarget(), nil, w)
		done <- outcome{r, err}
	}()
	var o outcome
	select {
	case o = <-done:
	case <-time.After(5 * time.Minute): // a hang guard: the next start is 15 minutes in
		t.Fatal("the run waited for the workers' next start")
	}
	if o.err != nil {
		t.Fatal(o.err)
	}
	if r := o.r; r.Attempts != 1 {
		t.Errorf("%d attempts, want 1 (worker 0 at t=0; the next is due at 15 min)", r.Attempts)
	}
}

// TestRun_window: the window hooks bracket the measured requests, after
// the warm-up, once each.
func TestRun_window(t *testing.T) {
	w := DefaultWorkload()
	w.Workers, w.Duration, w.Warmup = 2, 100*time.Millisecond, 100*time.Millisecond
	var begins, ends int
	var opened, closed time.Time
	began := time.Now()
	r, err := Run(t.Context(), memTarget(), nil, w, WithWindow(
		func() { begins++; opened = time.Now() },
		func() { ends++; closed = time.Now() }))
	if err != nil {
		t.Fatal(err)
	}
	if begins != 1 || ends != 1 {
		t.Fatalf("begin called %d times, end %d, want once each", begins, ends)
	}
	if opened.Sub(began) < w.Warmup {
		t.Errorf("window opened %v after the start, within the %v warm-up", opened.Sub(began), w.Warmup)
	}
	if window := closed.Sub(opened); window < r.Elapsed || window > r.Elapsed+50*time.Millisecond {
		t.Errorf("window %v, measured %v", window, r.Elapsed)
	}
}

func TestWorkload_Validate_rate(t *testing.T) {
	for _, tc := range []struct {
		name  string
		rate  float64
		shape Shape
		ok    bool
	}{
		{"closed", 0, Steady, true},
		{"open", 5000, Steady, true},
		{"open flash", 5000, Flash, true},
		{"negative", -1, Steady, false},
		{"above the ceiling", MaxRate + 1, Steady, false},
		{"checkout", 5000, Checkout, false},
	} {
		w := DefaultWorkload()
		w.Rate, w.Shape = tc.rate, tc.shape
		if err := w.Validate(); (err == nil) != tc.ok {
			t.Errorf("%s: Validate() = %v, want ok %v", tc.name, err, tc.ok)
		}
	}
}
