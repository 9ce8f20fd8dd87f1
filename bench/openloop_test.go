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
//
// The runs end after a number of requests, not after a duration, so that
// the counts below follow from the schedule whatever the machine's load.
func TestRun_openLoopShowsAStall(t *testing.T) {
	const (
		stall   = 100 * time.Millisecond
		stallAt = 400
	)
	w := DefaultWorkload()
	// The duration is a hang guard only: the op count ends the runs.
	w.Workers, w.Duration, w.Warmup, w.Ops = 4, 5*time.Minute, 0, 4000

	closed, err := Run(t.Context(), stallTarget(stallAt, stall), nil, w)
	if err != nil {
		t.Fatal(err)
	}
	wantSound(t, closed, true)
	// A closed-loop worker has one request in flight at any instant, so the
	// stall, or any pause of the machine however long, charges at most one
	// request per worker: 4 of 4000. p99 reaches the stall only if 40
	// requests each took 100 ms on their own, ten separate pauses of the
	// whole process; the defect this catches (latency counted from anything
	// earlier than the previous request's end) charges hundreds.
	if closed.Attempts != w.Ops || closed.Latency.Max < stall || closed.Latency.P99 >= stall {
		t.Errorf("closed-loop: %d attempts (want %d), max %v (want ≥ %v), p99 %v (want < %v: the stall hidden)",
			closed.Attempts, w.Ops, closed.Latency.Max, stall, closed.Latency.P99, stall)
	}

	w.Rate, w.Ops, w.Instances = 4000, 2000, w.Workers
	var tl timeline
	began := time.Now()
	open, err := Run(t.Context(), timedTarget(stallAt, stall, &tl), nil, w, WithWindow(nil, tl.close))
	took := time.Since(began)
	if err != nil {
		t.Fatal(err)
	}
	wantSound(t, open, true)
	// Lower bounds, which a loaded machine only makes easier to meet: the
	// stall begins after stallAt calls, so after stallAt of the schedule's
	// starts; every request due in the 20 ms after it began (80 at 4000/s,
	// less the 3 other workers' calls already under way) can end only once
	// it is over, at least 80 ms late — more than the 1% (20) that set p99.
	if open.Attempts != w.Ops || open.Latency.P99 < 80*time.Millisecond || open.Latency.Max < stall {
		t.Errorf("open-loop: %d attempts (want %d), p99 %v (want ≥ 80ms), max %v (want ≥ %v)",
			open.Attempts, w.Ops, open.Latency.P99, open.Latency.Max, stall)
	}
	// The schedule, not the target, sets the pace: no request starts before
	// its time, so the last of 2000 at 4000/s starts 499.75 ms in, where a
	// closed loop sends them all in a few milliseconds.
	if last := time.Duration(float64(w.Ops-1) * 1e9 / w.Rate); took < last {
		t.Errorf("open-loop: %d requests took %v, want ≥ %v (the last one's start)", w.Ops, took, last)
	}
	// Latency counts from each request's intended start, not from earlier:
	// a request ends before its worker's next call begins (or, the last,
	// before the window closes), and the run's clock starts after the
	// store was stocked, so each latency is at most that end, taken from
	// the stocking, less the request's intended start. The bound holds
	// whatever the load; counted from the run's start instead, as a
	// timetable-less harness would, the mean would exceed it by about the
	// mean intended start, 250 ms.
	var bound time.Duration
	for _, inst := range tl.insts {
		for _, c := range inst.calls[1:] {
			bound += c
		}
		bound += tl.closed
	}
	for i := range w.Ops {
		bound -= tl.stocked() + time.Duration(float64(i)*1e9/w.Rate)
	}
	bound /= time.Duration(w.Ops)
	// The histogram's mean is within 0.1%.
	if mean := open.Latency.Mean; mean-mean/500 > bound {
		t.Errorf("open-loop: mean latency %v, want ≤ %v (from each request's intended start)", mean, bound)
	}
}

// timedTarget is stallTarget with one instance per worker, each noting
// when its Decrement calls began, as tl.insts; tl.closed is set to when the
// window closed (WithWindow(nil, tl.close)).
func timedTarget(stallAt int64, stall time.Duration, tl *timeline) Target {
	tl.origin = time.Now()
	return Target{Name: "stall", About: "memstock stalling once", Open: func(context.Context, Servers, string) (*Store, error) {
		s := &stallInv{Store: memstock.New(), stallAt: stallAt, stall: stall}
		return &Store{New: func() (stockguard.Inventory, error) {
			inst := &timedInv{stallInv: s, tl: tl}
			tl.insts = append(tl.insts, inst)
			return inst, nil
		}}, nil
	}}
}

// timeline holds the times timedTarget notes, since origin.
type timeline struct {
	origin time.Time
	insts  []*timedInv
	stock  atomic.Int64 // when the last SetStock returned
	closed time.Duration
}

func (tl *timeline) now() time.Duration     { return time.Since(tl.origin) }
func (tl *timeline) close()                 { tl.closed = tl.now() }
func (tl *timeline) stocked() time.Duration { return time.Duration(tl.stock.Load()) }

type timedInv struct {
	*stallInv
	tl    *timeline
	calls []time.Duration // Decrement starts: one worker's, so unshared
}

func (t *timedInv) Decrement(ctx context.Context, sku string, qty int64) error {
	t.calls = append(t.calls, t.tl.now())
	return t.stallInv.Decrement(ctx, sku, qty)
}

func (t *timedInv) SetStock(ctx context.Context, sku string, qty int64) error {
	err := t.stallInv.SetStock(ctx, sku, qty)
	at := int64(t.tl.now())
	for {
		cur := t.tl.stock.Load()
		if cur >= at || t.tl.stock.CompareAndSwap(cur, at) {
			return err
		}
	}
}

// TestSchedule_wait: the workers' timetables together make one request
// every 1/Rate seconds from the run's start, and a worker never sends one
// before its time.
func TestSchedule_wait(t *testing.T) {
	w := DefaultWorkload()
	w.Workers, w.Rate = 3, 1000 // 1 ms apart: each worker every 3 ms
	stopped := make(chan struct{})
	seen := map[time.Duration]bool{}
	base := time.Now()
	for id := range w.Workers {
		s := newSchedule(w, id)
		for k := range 4 {
			at, ok := s.wait(base, stopped)
			if !ok {
				t.Fatalf("worker %d, request %d: wait reported a stop", id, k)
			}
			if now := time.Since(base); now < at {
				t.Errorf("worker %d, request %d: sent at %v, before its start %v", id, k, now, at)
			}
			if want := time.Duration(id+k*w.Workers) * time.Millisecond; at != want {
				t.Errorf("worker %d, request %d: start %v, want %v", id, k, at, want)
			}
			seen[at] = true
		}
	}
	if len(seen) != 4*w.Workers {
		t.Errorf("%d distinct starts, want %d", len(seen), 4*w.Workers)
	}
	close(stopped)
	s := newSchedule(w, 0)
	s.next = 1 << 40 // centuries ahead: only the stop can end the wait
	if _, ok := s.wait(base, stopped); ok {
		t.Error("wait for a start centuries ahead returned without the stop")
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
// the warm-up, once each: every measured request begins after begin, and
// none is under way or still to come when end is called.
func TestRun_window(t *testing.T) {
	w := DefaultWorkload()
	w.Workers, w.Duration, w.Warmup = 2, 100*time.Millisecond, 100*time.Millisecond
	var begins, ends int
	var opened, closed time.Time
	var calls, inFlight atomic.Int64
	var callsAtBegin, callsAtEnd, inFlightAtEnd int64
	target := Target{Name: "counted", About: "memstock counting its calls", Open: func(context.Context, Servers, string) (*Store, error) {
		s := &countedInv{Store: memstock.New(), calls: &calls, inFlight: &inFlight}
		return &Store{New: func() (stockguard.Inventory, error) { return s, nil }}, nil
	}}
	began := time.Now()
	r, err := Run(t.Context(), target, nil, w, WithWindow(
		func() { begins++; opened = time.Now(); callsAtBegin = calls.Load() },
		func() { ends++; closed = time.Now(); callsAtEnd, inFlightAtEnd = calls.Load(), inFlight.Load() }))
	if err != nil {
		t.Fatal(err)
	}
	if begins != 1 || ends != 1 {
		t.Fatalf("begin called %d times, end %d, want once each", begins, ends)
	}
	if opened.Sub(began) < w.Warmup {
		t.Errorf("window opened %v after the start, within the %v warm-up", opened.Sub(began), w.Warmup)
	}
	// Measured requests begin after begin (warm-up ones may too, until
	// the workers see the phase change).
	if after := callsAtEnd - callsAtBegin; after < r.Attempts {
		t.Errorf("%d calls inside the window, fewer than the %d measured", after, r.Attempts)
	}
	if inFlightAtEnd != 0 || calls.Load() != callsAtEnd {
		t.Errorf("at end: %d calls under way, %d more to come, want none", inFlightAtEnd, calls.Load()-callsAtEnd)
	}
	if window := closed.Sub(opened); window < r.Elapsed {
		t.Errorf("window %v, shorter than the measured %v", window, r.Elapsed)
	}
}

// countedInv is memstock counting its Decrement calls, begun and under way.
type countedInv struct {
	*memstock.Store
	calls, inFlight *atomic.Int64
}

func (c *countedInv) Decrement(ctx context.Context, sku string, qty int64) error {
	c.calls.Add(1)
	c.inFlight.Add(1)
	defer c.inFlight.Add(-1)
	return c.Store.Decrement(ctx, sku, qty)
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
