package bench_test

import (
	"context"
	"errors"
	"flag"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stockguard/stockguard/bench"
	_ "github.com/stockguard/stockguard/bench/all"
	"github.com/stockguard/stockguard/bench/replicatargets"
	"github.com/stockguard/stockguard/bench/tidbtargets"
	"github.com/stockguard/stockguard/internal/backends/backendstest"
)

func TestMain(m *testing.M) { backendstest.Main(m, shared.close) }

// sharedServers holds the servers of each backend, opened on first use
// through the backend's own opener with its defaults — as stockbench
// without flags: the STOCKGUARD_* environment, else private servers — and
// kept for the whole test binary.
type sharedServers struct {
	mu     sync.Mutex
	opened map[string]*bench.Opened
	errs   map[string]error
}

var shared = &sharedServers{opened: map[string]*bench.Opened{}, errs: map[string]error{}}

func (s *sharedServers) open(name string) (*bench.Opened, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if o, ok := s.opened[name]; ok {
		return o, s.errs[name]
	}
	i := slices.IndexFunc(bench.Backends(), func(b bench.Backend) bool { return b.Name == name })
	if i < 0 {
		return nil, errNotRegistered(name)
	}
	opener := bench.Backends()[i].Flags(flag.NewFlagSet(name, flag.ContinueOnError))
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	o, err := opener.Open(ctx, bench.OpenConfig{Pool: 256})
	s.opened[name], s.errs[name] = o, err
	return o, err
}

func (s *sharedServers) close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, o := range s.opened {
		if o != nil {
			o.Close()
		}
	}
}

type errNotRegistered string

func (e errNotRegistered) Error() string { return "backend " + string(e) + " is not registered" }

// testServers returns the servers t needs, skipping tb without them (or
// failing it under STOCKGUARD_REQUIRE_BACKENDS).
func testServers(tb testing.TB, t bench.Target) bench.Servers {
	tb.Helper()
	backendstest.SkipShort(tb)
	if slices.Contains(t.Needs, tidbtargets.Name) {
		backendstest.SkipUnlessTiDB(tb)
	}
	s := bench.Servers{}
	for _, name := range t.Needs {
		o, err := shared.open(name)
		if _, ok := err.(errNotRegistered); ok {
			tb.Fatalf("%s: %v", t.Name, err)
		}
		if err != nil {
			backendstest.Unavailable(tb, err)
		}
		s[name] = o.Conn
	}
	return s
}

// serverInfo describes the servers of the backends shared has opened, for
// bench.WithServerCPU (Run measures those of its target's backends).
func serverInfo() []bench.Server {
	shared.mu.Lock()
	defer shared.mu.Unlock()
	var info []bench.Server
	for _, o := range shared.opened {
		if o != nil {
			info = append(info, o.Servers...)
		}
	}
	return info
}

func TestTargets_registry(t *testing.T) {
	seen := map[string]bool{}
	for _, list := range [][]bench.Target{bench.Targets(), bench.Counterexamples()} {
		for _, tg := range list {
			if tg.Name == "" || tg.About == "" || tg.Open == nil || len(tg.Needs) == 0 {
				t.Errorf("incomplete target %+v", tg)
			}
			for _, n := range tg.Needs {
				if !slices.ContainsFunc(bench.Backends(), func(b bench.Backend) bool { return b.Name == n }) {
					t.Errorf("%s needs %q, which is not a registered backend", tg.Name, n)
				}
			}
			if seen[tg.Name] {
				t.Errorf("%s registered twice", tg.Name)
			}
			seen[tg.Name] = true
			if got, ok := bench.Lookup(tg.Name); !ok || got.Name != tg.Name {
				t.Errorf("Lookup(%q) = %v, %v", tg.Name, got.Name, ok)
			}
		}
	}
	for _, tg := range bench.Targets() {
		if tg.Counterexample {
			t.Errorf("%s: a counterexample among the strategies", tg.Name)
		}
	}
	for _, tg := range bench.Counterexamples() {
		if !tg.Counterexample {
			t.Errorf("%s: not marked as a counterexample", tg.Name)
		}
	}
	if _, ok := bench.Lookup("no-such-strategy"); ok {
		t.Error("Lookup found a strategy that does not exist")
	}
}

// TestRegister_refusesDuplicatesAndIncompleteTargets: a registration error
// is a programming error, caught at start-up by a panic.
func TestRegister_refusesDuplicatesAndIncompleteTargets(t *testing.T) {
	existing := bench.Targets()[0]
	for _, tc := range []struct {
		name string
		f    func()
	}{
		{"duplicate target", func() { bench.Register(existing) }},
		{"target without Open", func() { bench.Register(bench.Target{Name: "x-no-open", About: "x"}) }},
		{"duplicate backend", func() { bench.RegisterBackend(bench.Backends()[0]) }},
		{"backend without Flags", func() { bench.RegisterBackend(bench.Backend{Name: "x-no-flags"}) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			defer func() {
				if recover() == nil {
					t.Error("no panic")
				}
			}()
			tc.f()
		})
	}
	if len(bench.Targets()) == 0 || bench.Targets()[0].Name != existing.Name {
		t.Error("a refused registration changed the registry")
	}
}

// TestStrategies_sound runs every registered strategy briefly, steady and
// flash, on real servers, across two instances, and wants the audit clean.
// EnvReplicas=full makes TestStrategies_sound run every strategy on the
// deployments with replicas (redis-sentinel-*, redis-cluster-*); by
// default it runs replicaSample, which covers each deployment with and
// without the acknowledgement, so that the test command stays short.
const EnvReplicas = "STOCKGUARD_REPLICAS"

var replicaSample = []string{"redis-sentinel-atomic", "redis-sentinel-atomic-ack", "redis-sentinel-batched-ack", "redis-cluster-atomic-ack"}

// onReplicas reports whether t keeps its stock on a deployment with
// replicas.
func onReplicas(t bench.Target) bool {
	return len(t.Needs) > 0 && (t.Needs[0] == replicatargets.SentinelName || t.Needs[0] == replicatargets.ClusterName)
}

func TestStrategies_sound(t *testing.T) {
	// Counts, not windows: what each run must show (a success, a sell-out)
	// may not depend on how fast a loaded machine runs a slow strategy —
	// Redlock on 2 cores under -race beside other jobs once ended a 300 ms
	// window before its first call did, and a 30 s flash before it sold out.
	steady := bench.DefaultWorkload()
	steady.Workers, steady.Ops, steady.Duration, steady.Warmup = 16, 320, 0, 0
	flash := steady
	// A flash run ends when it sells out; the count only bounds a hang.
	flash.Shape, flash.Stock, flash.QtyMin, flash.QtyMax, flash.Ops = bench.Flash, 300, 1, 3, 1<<20
	allReplicas := os.Getenv(EnvReplicas) == "full"
	for _, tg := range bench.Targets() {
		if !allReplicas && onReplicas(tg) && !slices.Contains(replicaSample, tg.Name) {
			continue // STOCKGUARD_REPLICAS=full runs them (CI does, once)
		}
		t.Run(tg.Name, func(t *testing.T) {
			s := testServers(t, tg)
			for _, w := range []bench.Workload{steady, flash, checkoutWorkload()} {
				r, err := bench.Run(t.Context(), tg, s, w)
				if w.Shape == bench.Checkout && errors.Is(err, bench.ErrSkipped) {
					t.Logf("checkout: %v", err)
					continue
				}
				if err != nil {
					t.Fatalf("%v: %v", w.Shape, err)
				}
				if !r.Sound() || r.Successes == 0 || r.Errors["other"] != 0 {
					t.Errorf("%v: sound %v, %d successes, errors %v %q; audit %+v", w.Shape, r.Sound(), r.Successes, r.Errors, r.OtherErrors, r.Audit)
				}
				if !r.Audit.Raw || r.Audit.Mismatches != 0 {
					t.Errorf("%v: the backend was not read independently, or disagreed: %+v", w.Shape, r.Audit)
				}
				if w.Shape == bench.Checkout && (r.Audit.Orders == 0 || r.Audit.Held != 0 || r.Audit.Taken == 0) {
					t.Errorf("checkout: %d orders checked, %d units held after the deadlines, %d taken", r.Audit.Orders, r.Audit.Held, r.Audit.Taken)
				}
				if strings.HasPrefix(tg.Name, "tiered-") && (r.Stats["back_applied"] == 0 || r.Stats["lag_p99_ms"] == 0) {
					t.Errorf("%v: the back's figures are missing from the result: %v", w.Shape, r.Stats)
				}
				if w.Shape == bench.Flash && (!r.SoldOut || r.Audit.Acked < 298) {
					t.Errorf("flash: sold out %v, %d units acknowledged of 300", r.SoldOut, r.Audit.Acked)
				}
			}
		})
	}
}

// checkoutWorkload is a short checkout (400 operations) with carts of up to 3 lines over 8
// SKUs, short carts, holds that expire quickly and restocks.
func checkoutWorkload() bench.Workload {
	w := bench.DefaultWorkload()
	w.Shape, w.SKUs, w.Skew, w.Stock = bench.Checkout, 8, bench.Skew{Zipf: 1.1}, 2000
	// A count, not a window: on a loaded machine a 300ms window once
	// ended before the first order of a slow target did.
	w.Workers, w.Ops, w.Duration, w.Warmup = 16, 400, 0, 0
	w.Orders.HoldTTL = 50 * time.Millisecond
	return w
}

// TestCounterexamples_caught is the proof that the audit can fail: under
// the default workload (the default checkout for the broken checkout
// clients) every counterexample is found unsound. The runs are a count of
// requests rather than a window, so that a fault keyed on a call counter
// shows whatever the machine's load.
func TestCounterexamples_caught(t *testing.T) {
	for _, tg := range bench.Counterexamples() {
		t.Run(tg.Name, func(t *testing.T) {
			t.Parallel()
			w := bench.DefaultWorkload()
			w.Ops, w.Duration, w.Warmup = 3_000, 0, 0
			if tg.OrdersOnly {
				w.Shape, w.Ops = bench.Checkout, 800
			}
			r, err := bench.Run(t.Context(), tg, testServers(t, tg), w)
			if err != nil {
				t.Fatal(err)
			}
			a := r.Audit
			if r.Sound() || a.Oversold+a.Lost+a.Duplicated+a.BadOrders+a.FalseRefusals+a.Unresolved == 0 && a.Failed == "" {
				t.Errorf("not caught: %d successes, errors %v, audit %+v", r.Successes, r.Errors, r.Audit)
			}
			t.Logf("caught: oversold %d, lost %d of %d acknowledged; %s", r.Audit.Oversold, r.Audit.Lost, r.Audit.Acked, r.Audit.Problems)
		})
	}
}
