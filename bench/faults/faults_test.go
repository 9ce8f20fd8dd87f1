package faults_test

import (
	"context"
	"errors"
	"io"
	"log"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/redis/go-redis/v9"

	"github.com/stockguard/stockguard"
	"github.com/stockguard/stockguard/bench"
	_ "github.com/stockguard/stockguard/bench/all" // every registered strategy
	"github.com/stockguard/stockguard/bench/faults"
	"github.com/stockguard/stockguard/bench/mysqltargets"
	"github.com/stockguard/stockguard/bench/pgtargets"
	"github.com/stockguard/stockguard/bench/redistargets"
	"github.com/stockguard/stockguard/internal/backends/backendstest"
)

// EnvFull selects the whole matrix: every fault × every strategy, 32
// buyers, faults.DefaultDuration each (CI runs it from .ci/run).
const EnvFull = "STOCKGUARD_FAULTS"

// quiet drops go-redis's log lines: connections fail by design here.
type quiet struct{}

func (quiet) Printf(context.Context, string, ...any) {}

var shared struct {
	once sync.Once
	env  *faults.Env
	err  error
}

func TestMain(m *testing.M) {
	redis.SetLogger(quiet{})
	mysql.SetLogger(log.New(io.Discard, "", 0))
	backendstest.Main(m, func() {
		if shared.env != nil {
			shared.env.Close()
		}
		for _, r := range replicaEnvs {
			if r.env != nil {
				r.env.Close()
			}
		}
	})
}

// env returns the test binary's private single servers, started on first
// use; the deployments with replicas are replicaEnv's.
func env(t *testing.T) *faults.Env {
	t.Helper()
	backendstest.SkipShort(t)
	shared.once.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		single := slices.DeleteFunc(faults.Backends(), func(n string) bool { return replicaEnvs[n] != nil })
		shared.env, shared.err = faults.Start(ctx, single...)
	})
	if shared.err != nil {
		backendstest.Unavailable(t, shared.err)
	}
	return shared.env
}

// fullDuration is each run's length under STOCKGUARD_FAULTS=full.
const fullDuration = 8 * time.Second

// defaultMatrix is what go test runs without STOCKGUARD_FAULTS=full, in
// about a minute: every strategy through connections cut, every strategy
// on MySQL and Redis through tiny deadlines (a fault of the client's, so
// the variants of the same strategies on other servers add nothing), and
// two to four strategies through each other fault, spread so that each
// backend and each kind of strategy — one statement or script (with
// Orders, where lost replies are reconciled exactly), a batch, a lock or
// transaction around read-modify-write, segments — meets a server-side
// failure.
var defaultMatrix = map[string]func(bench.Target) bool{
	"cut":        func(bench.Target) bool { return true },
	"deadline":   either(on(mysqltargets.Name, redistargets.Name), named("pg-atomic", "pg-batched", "pg-segmented")),
	"lose-reply": named("mysql-atomic", "mysql-batched", "redis-atomic", "redis-batched", "pg-atomic", "pg-batched"),
	"kill-conn":  named("mysql-pessimistic", "mysql-namedlock", "redis-watchtx", "redis-guarded", "pg-pessimistic", "pg-advisory"),
	"pause":      named("mysql-batched", "redis-guarded", "pg-batched"),
	"restart":    named("mysql-atomic", "redis-atomic", "valkey-atomic"),
	"shutdown":   named("mysql-segmented", "redis-watchtx"),
	"read-only":  named("mysql-optimistic", "redis-segmented", "pg-optimistic", "pg-serializable"),
}

// either selects the strategies a or b selects.
func either(a, b func(bench.Target) bool) func(bench.Target) bool {
	return func(t bench.Target) bool { return a(t) || b(t) }
}

// fullMatrix is what STOCKGUARD_FAULTS=full runs: every strategy through
// every fault, but PostgreSQL's on-request strategies only through the
// default matrix's picks — pg-atomic and pg-batched stand for the backend
// in full (restart and shutdown included), keeping the CI matrix's growth
// to a few minutes. Valkey runs redislock's and watchtx's code as Redis
// does: what differs is the server, met in full by one script
// (valkey-atomic), a batch (valkey-batched) and WATCH (valkey-watchtx); the
// locks on it, whose code redis-* runs in full, only through the picks.
// The faults of the back (restart-back, pause-back) run only here: a
// database restarted takes seconds.
func fullMatrix(f faults.Fault, t bench.Target) bool {
	switch {
	case f.Back(), t.Name == "pg-atomic", t.Name == "pg-batched":
		return true
	case slices.Contains(picksOnly, t.Name), len(t.Needs) > 0 && t.Needs[0] == pgtargets.Name:
		pick := defaultMatrix[f.Name]
		return pick != nil && pick(t)
	}
	return true
}

// picksOnly are the strategies, beside PostgreSQL's on-request ones, that
// the full matrix takes through the default picks only: tiered-pg (its
// faults strike the Redis front, which tiered-mysql runs in full) and the
// Valkey locks.
var picksOnly = []string{"tiered-pg", "valkey-guarded", "valkey-segmented", "valkey-redlock"}

// named selects the strategies called names.
func named(names ...string) func(bench.Target) bool {
	return func(t bench.Target) bool { return slices.Contains(names, t.Name) }
}

// on selects the strategies whose stock lives on one of backends.
func on(backends ...string) func(bench.Target) bool {
	return func(t bench.Target) bool { return len(t.Needs) > 0 && slices.Contains(backends, t.Needs[0]) }
}

// TestRun_conservation runs concurrent buyers through each fault on each
// strategy and fails on anything the run found: units oversold, lost or
// duplicated, an unknown order left unreconciled, an error outside the
// contract, "busy" from a server that was down, a panic, goroutines or
// connections left after Close.
func TestRun_conservation(t *testing.T) {
	e := env(t)
	full := os.Getenv(EnvFull) == "full"
	cfg := faults.Config{Buyers: 16, Duration: time.Second}
	if full {
		// 8 s, not the 10 s default: 32 buyers through a 4 s fault and
		// 2 s after it prove the same, and keep CI under an hour.
		cfg = faults.Config{Duration: fullDuration}
	}
	for _, f := range faults.Faults() {
		if f.Replicas() {
			continue // TestFailover
		}
		t.Run("fault="+f.Name, func(t *testing.T) {
			for _, target := range bench.Targets() {
				if target.Name == "tiered-mysql-after" {
					continue // tiered-mysql with its consumer started late: a measurement of the front
				}
				if pick := defaultMatrix[f.Name]; !faults.Applies(f, target) || !full && (pick == nil || !pick(target)) || full && !fullMatrix(f, target) {
					continue
				}
				t.Run("strategy="+target.Name, func(t *testing.T) {
					rep, err := faults.Run(t.Context(), e, target, f, cfg)
					if errors.Is(err, bench.ErrMissingBackend) {
						t.Skipf("no private servers for it: %v", err)
					}
					if err != nil {
						t.Fatal(err)
					}
					logReport(t, rep)
					// A lock strategy on a loaded machine may have nothing
					// succeed in the default run's 1 s; in the full run's 8 s it must.
					if rep.Ops == 0 || (full && rep.Kinds["ok"] == 0) {
						t.Errorf("no call succeeded in %d calls", rep.Ops)
					}
					if rep.Injected == 0 {
						t.Errorf("the fault never struck")
					}
					if f.Back() && rep.Recorded == 0 {
						t.Errorf("no order read back from the store of record behind the front")
					}
					if !rep.OK() {
						t.Errorf("%s", rep.Audit())
					}
				})
			}
		})
	}
}

func TestRun_badConfig(t *testing.T) {
	_, err := faults.Run(t.Context(), nil, bench.Target{}, faults.Faults()[0], faults.Config{Buyers: -1})
	if !errors.Is(err, stockguard.ErrInvalidRequest) {
		t.Fatalf("Run with Buyers -1: %v, want ErrInvalidRequest", err)
	}
}

func TestLookup(t *testing.T) {
	tests := []struct {
		list string
		want []string
		ok   bool
	}{
		{"cut", []string{"cut"}, true},
		{" restart, cut ,restart", []string{"restart", "cut"}, true},
		{"all", faults.Names(), true},
		{"cut,nope", nil, false},
		{",", nil, false},
	}
	for _, tt := range tests {
		fs, err := faults.Lookup(tt.list)
		if (err == nil) != tt.ok {
			t.Errorf("Lookup(%q): error %v, want ok=%v", tt.list, err, tt.ok)
			continue
		}
		var got []string
		for _, f := range fs {
			got = append(got, f.Name)
		}
		if !slices.Equal(got, tt.want) {
			t.Errorf("Lookup(%q) = %v, want %v", tt.list, got, tt.want)
		}
	}
}

// TestRestart_withoutPersistence restarts, empty, a Redis that kept no
// append-only file or snapshot, as a cache-configured Redis comes back:
// the stock is gone, and every strategy must say so — ErrUnknownSKU for
// every call, nothing created (no DECRBY on a missing key making stock
// out of nothing), and an order taken before the restart unknown.
func TestRestart_withoutPersistence(t *testing.T) {
	backendstest.SkipShort(t)
	for _, target := range bench.Targets() {
		if target.Needs[0] != redistargets.Name || slices.ContainsFunc(target.Needs, func(n string) bool {
			return n != redistargets.Name && n != redistargets.RedlockName
		}) {
			continue // a back beside Redis (tiered-*) holds the stock of record: not Redis alone
		}
		t.Run("strategy="+target.Name, func(t *testing.T) {
			ctx := t.Context()
			srvs := backendstest.PrivateRedis(t, redistargets.RedlockVoters)
			conns := bench.Servers{}
			var voters []redis.UniversalClient
			for i, s := range srvs {
				c := s.Client()
				t.Cleanup(func() { c.Close() })
				if i == 0 {
					conns[redistargets.Name] = redis.UniversalClient(c)
				} else {
					voters = append(voters, c)
				}
			}
			conns[redistargets.RedlockName] = voters
			store, err := target.Open(ctx, conns, "norestart")
			if err != nil {
				t.Fatal(err)
			}
			inv, err := store.New()
			if err != nil {
				t.Fatal(err)
			}
			if c, ok := inv.(io.Closer); ok {
				t.Cleanup(func() { c.Close() })
			}
			ord, isOrders := inv.(stockguard.Orders)
			if err := inv.SetStock(ctx, "tee", 100); err != nil {
				t.Fatal(err)
			}
			if err := inv.Decrement(ctx, "tee", 1); err != nil {
				t.Fatal(err)
			}
			if isOrders {
				if err := ord.Take(ctx, "before", stockguard.Line{SKU: "tee", Qty: 2}); err != nil {
					t.Fatal(err)
				}
			}

			if err := srvs[0].Restart(ctx); err != nil {
				t.Fatal(err)
			}

			calls := map[string]func(context.Context) error{
				"Decrement": func(ctx context.Context) error { return inv.Decrement(ctx, "tee", 1) },
				"Stock":     func(ctx context.Context) error { _, err := inv.Stock(ctx, "tee"); return err },
				"raw read":  func(ctx context.Context) error { _, err := store.Raw(ctx, "tee"); return err },
			}
			if isOrders {
				calls["Take"] = func(ctx context.Context) error {
					return ord.Take(ctx, "after", stockguard.Line{SKU: "tee", Qty: 1})
				}
			}
			for name, call := range calls {
				if err := answer(ctx, call); !errors.Is(err, stockguard.ErrUnknownSKU) {
					t.Errorf("%s after the restart: %v, want ErrUnknownSKU", name, err)
				}
			}
			if isOrders {
				if _, err := ord.Order(ctx, "before"); !errors.Is(err, stockguard.ErrUnknownOrder) {
					t.Errorf("Order of an order taken before the restart: %v, want ErrUnknownOrder (its record is gone too)", err)
				}
			}
		})
	}
}

// answer calls call until the server answers: the first calls after a
// restart meet the connections it broke.
func answer(ctx context.Context, call func(context.Context) error) error {
	for {
		err := call(ctx)
		if !errors.Is(err, stockguard.ErrUnavailable) && !errors.Is(err, stockguard.ErrOutcomeUnknown) || ctx.Err() != nil {
			return err
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// logReport logs rep's table and, when the run left goroutines behind,
// their stacks: a leak that shows once in CI is diagnosed from the log.
func logReport(t *testing.T, rep *faults.Report) {
	t.Helper()
	var b strings.Builder
	faults.WriteTable(&b, []*faults.Report{rep})
	t.Log("\n" + b.String())
	if rep.Goroutines != "" {
		t.Logf("goroutines left:\n%s", rep.Goroutines)
	}
}
