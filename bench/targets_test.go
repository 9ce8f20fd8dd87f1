package bench

import (
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/stockguard/stockguard/internal/backends"
)

func TestMain(m *testing.M) { backends.Main(m) }

// testBackends connects to the servers t needs (skipping without them),
// with the DSN setting stockguard recommends and stockbench uses.
func testBackends(tb testing.TB, t Target) Backends {
	tb.Helper()
	var b Backends
	if t.Needs&NeedMySQL != 0 {
		b.DB = backends.DB(tb, func(c *mysql.Config) { c.InterpolateParams = true })
	}
	if t.Needs&NeedRedis != 0 {
		b.Redis = backends.RedisClient(tb)
	}
	if t.Needs&NeedRedlock != 0 {
		for _, r := range backends.PrivateRedis(tb, RedlockVoters-1) {
			c := r.Client()
			tb.Cleanup(func() { c.Close() })
			b.RedlockMasters = append(b.RedlockMasters, c)
		}
	}
	return b
}

func TestTargets_registry(t *testing.T) {
	seen := map[string]bool{}
	for _, list := range [][]Target{Targets(), Counterexamples()} {
		for _, tg := range list {
			if tg.Name == "" || tg.About == "" || tg.Open == nil || tg.Needs == 0 {
				t.Errorf("incomplete target %+v", tg)
			}
			if seen[tg.Name] {
				t.Errorf("%s registered twice", tg.Name)
			}
			seen[tg.Name] = true
			if got, ok := Lookup(tg.Name); !ok || got.Name != tg.Name {
				t.Errorf("Lookup(%q) = %v, %v", tg.Name, got.Name, ok)
			}
		}
	}
	for _, tg := range Targets() {
		if tg.Counterexample {
			t.Errorf("%s: a counterexample among the strategies", tg.Name)
		}
	}
	for _, tg := range Counterexamples() {
		if !tg.Counterexample {
			t.Errorf("%s: not marked as a counterexample", tg.Name)
		}
	}
	if _, ok := Lookup("no-such-strategy"); ok {
		t.Error("Lookup found a strategy that does not exist")
	}
}

// TestStrategies_sound runs every registered strategy briefly, steady and
// flash, on real servers, across two instances, and wants the audit clean.
func TestStrategies_sound(t *testing.T) {
	steady := DefaultWorkload()
	steady.Workers, steady.Duration, steady.Warmup = 16, 300*time.Millisecond, 50*time.Millisecond
	flash := steady
	flash.Shape, flash.Stock, flash.QtyMin, flash.QtyMax, flash.Duration = Flash, 300, 1, 3, 5*time.Second
	for _, tg := range Targets() {
		t.Run(tg.Name, func(t *testing.T) {
			b := testBackends(t, tg)
			for _, w := range []Workload{steady, flash} {
				r, err := Run(t.Context(), tg, b, w)
				if err != nil {
					t.Fatalf("%v: %v", w.Shape, err)
				}
				if !r.Sound() || r.Successes == 0 || r.Errors["other"] != 0 {
					t.Errorf("%v: sound %v, %d successes, errors %v %q; audit %+v", w.Shape, r.Sound(), r.Successes, r.Errors, r.OtherErrors, r.Audit)
				}
				if !r.Audit.Raw || r.Audit.Mismatches != 0 {
					t.Errorf("%v: the backend was not read independently, or disagreed: %+v", w.Shape, r.Audit)
				}
				if w.Shape == Flash && (!r.SoldOut || r.Audit.Acked < 298) {
					t.Errorf("flash: sold out %v, %d units acknowledged of 300", r.SoldOut, r.Audit.Acked)
				}
			}
		})
	}
}

// TestCounterexamples_caught is the proof that the audit can fail: under
// the default contention workload every counterexample is found unsound.
func TestCounterexamples_caught(t *testing.T) {
	for _, tg := range Counterexamples() {
		t.Run(tg.Name, func(t *testing.T) {
			t.Parallel()
			r, err := Run(t.Context(), tg, testBackends(t, tg), DefaultWorkload())
			if err != nil {
				t.Fatal(err)
			}
			if r.Sound() || r.Audit.Oversold+r.Audit.Lost == 0 {
				t.Errorf("not caught: %d successes, errors %v, audit %+v", r.Successes, r.Errors, r.Audit)
			}
			t.Logf("caught: oversold %d, lost %d of %d acknowledged; %s", r.Audit.Oversold, r.Audit.Lost, r.Audit.Acked, r.Audit.Problems)
		})
	}
}
