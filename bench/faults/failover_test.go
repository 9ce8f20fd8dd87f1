package faults_test

import (
	"cmp"
	"context"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stockguard/stockguard/bench"
	"github.com/stockguard/stockguard/bench/faults"
	"github.com/stockguard/stockguard/bench/replicatargets"
	"github.com/stockguard/stockguard/internal/backends/backendstest"
)

// EnvFailover selects the failover matrix: every strategy on replicas
// through FullFailovers failovers with a replica's acknowledgement and a
// few without (CI runs it once from .ci/run).
const EnvFailover = "STOCKGUARD_FAILOVER"

// fullFailovers is how many failovers in a row the full matrix strikes
// each strategy with, by backend, fault and whether it waits for a
// replica's acknowledgement: with it, on Sentinel 20 in all (16 killed
// masters, 4 split brains), on Cluster 14 killed masters, each after a
// second of replica lag (each some 20 s of failure detection, election,
// restart and resync on a loaded machine: 14 is what CI's budget allows;
// docs/faults.md records a run of 20), none of which may lose a unit,
// forget an order or hand out a fencing token twice; without it, enough to
// show the loss.
var fullFailovers = map[string]map[string]map[bool]int{
	replicatargets.SentinelName: {
		"failover":         {true: 16, false: 2},
		"partition-master": {true: 4, false: 1},
	},
	replicatargets.ClusterName: {
		"failover": {true: 14, false: 1},
	},
}

// tieredFailovers is fullFailovers for the tiered targets on Sentinel
// (tiered-sentinel-mysql-ack, its counterexample): with the ack 12 killed
// masters and 4 split brains, after which every acknowledged order must be
// in the back once and the tiers agree; without it, as many as show the
// loss (a run whose back fell short never drains, and waits out the
// audit's two minutes).
var tieredFailovers = map[string]map[bool]int{
	"failover":         {true: 12, false: 2},
	"partition-master": {true: 4, false: 1},
}

// replicaEnvs are the test binary's private deployments with replicas, by
// backend, each started on first use.
var replicaEnvs = map[string]*struct {
	once sync.Once
	env  *faults.Env
	err  error
}{
	replicatargets.SentinelName: {},
	replicatargets.ClusterName:  {},
}

// replicaEnv returns the test binary's private deployment of needs[0] (the
// Sentinel topology, the Cluster with replicas), with the other servers of
// needs (a tiered target's database), started on first use, apart from
// env's single servers: the first call's needs are the env's.
func replicaEnv(t *testing.T, needs []string) *faults.Env {
	t.Helper()
	backendstest.SkipShort(t)
	r := replicaEnvs[needs[0]]
	r.once.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		r.env, r.err = faults.Start(ctx, needs...)
	})
	if r.err != nil {
		backendstest.Unavailable(t, r.err)
	}
	return r.env
}

// defaultFailovers is what go test runs without STOCKGUARD_FAILOVER=full:
// one failover of the single-script strategy with and without the
// acknowledgement (the loss of the latter reported, not asserted), one
// split brain of the batched strategy with it, one failover of the
// single-script strategy with it on Cluster, and one of each of the tiered
// target with it.
var defaultFailovers = map[string][]string{
	"failover":         {"redis-sentinel-atomic-ack", "redis-sentinel-atomic", "redis-cluster-atomic-ack", "tiered-sentinel-mysql-ack"},
	"partition-master": {"redis-sentinel-batched-ack", "tiered-sentinel-mysql-ack"},
}

// TestFailover runs buyers and lockers on a Sentinel topology and on a
// Cluster with replicas through failovers — the replica lagging, then the
// master killed; on Sentinel also the master cut from its replica and
// Sentinels while clients still write to it — and audits on the new
// master. A strategy that waits for a replica's
// acknowledgement must lose nothing: no acknowledged unit back in stock,
// no acknowledged order forgotten, no fencing token handed out twice, and
// every SKU and lock usable again after each failover. One that does not
// wait is a counterexample: in the full matrix it must be seen to lose
// (the lag is real), or the test proves nothing.
//
// The full matrix runs each strategy on a topology of its own, in
// parallel (go test -parallel 5): a failover is mostly waiting for the
// Sentinels, and 20 in a row take minutes.
func TestFailover(t *testing.T) {
	full := os.Getenv(EnvFailover) == "full"
	cfg := faults.Config{Buyers: 16, Duration: time.Second}
	if full {
		// The strategies run in parallel: goroutines are the process's.
		cfg = faults.Config{Buyers: 16, Duration: 4 * time.Second, Concurrent: true}
	}
	var replicaFaults []faults.Fault
	for _, f := range faults.Faults() {
		if f.Replicas() {
			replicaFaults = append(replicaFaults, f)
		}
	}
	picked := func(f faults.Fault, target bench.Target) bool {
		return faults.Applies(f, target) && (full || slices.Contains(defaultFailovers[f.Name], target.Name))
	}
	var targets []bench.Target
	runs := 0
	for _, target := range bench.Targets() {
		n := 0
		for _, f := range replicaFaults {
			if picked(f, target) {
				n++
			}
		}
		if n > 0 {
			targets, runs = append(targets, target), runs+n
		}
	}
	if want := len(defaultFailovers["failover"]) + len(defaultFailovers["partition-master"]); !full && runs != want {
		t.Fatalf("%d of the %d default runs %v have their strategy registered", runs, want, defaultFailovers)
	}
	// The shared deployments carry the servers of every target on them:
	// a tiered one's database beside its front.
	needs := map[string][]string{}
	for _, target := range targets {
		b := target.Needs[0]
		for _, n := range target.Needs {
			if !slices.Contains(needs[b], n) {
				needs[b] = append(needs[b], n)
			}
		}
	}
	// The tiered rows first: their audit waits for the backlog to drain,
	// which a full run overlaps with the others' failovers.
	slices.SortStableFunc(targets, func(a, b bench.Target) int {
		return cmp.Compare(tieredRank(a), tieredRank(b))
	})
	for _, target := range targets {
		t.Run("strategy="+target.Name, func(t *testing.T) {
			var e *faults.Env
			backend := target.Needs[0]
			if full {
				t.Parallel()
				e = privateReplicaEnv(t, target.Needs)
			} else {
				e = replicaEnv(t, needs[backend])
			}
			acked := replicatargets.Acked(target.Name)
			for _, f := range replicaFaults {
				if !picked(f, target) {
					continue
				}
				t.Run("fault="+f.Name, func(t *testing.T) {
					cfg := cfg
					if full {
						cfg.Failovers = fullFailovers[backend][f.Name][acked]
						if tieredRank(target) == 0 {
							cfg.Failovers = tieredFailovers[f.Name][acked]
						}
					}
					rep, err := faults.Run(t.Context(), e, target, f, cfg)
					if err != nil {
						t.Fatal(err)
					}
					logReport(t, rep)
					if want := max(cfg.Failovers, 1); rep.Injected != want {
						t.Errorf("%d failovers, want %d", rep.Injected, want)
					}
					if rep.Kinds["ok"] == 0 || rep.Locks == 0 {
						t.Errorf("nothing acknowledged: %d takes, %d locks", rep.Kinds["ok"], rep.Locks)
					}
					switch {
					case acked && !rep.OK():
						t.Errorf("%s", rep.Audit())
					case acked:
					case !rep.Counterexample:
						t.Errorf("without a replica's acknowledgement, not reported as a counterexample")
					case rep.Sound() && full:
						t.Errorf("without a replica's acknowledgement, nothing lost in %d failovers: the replica did not lag", rep.Injected)
					case rep.Sound():
						t.Logf("without a replica's acknowledgement, nothing lost this time")
					}
				})
			}
		})
	}
}

// tieredRank is 0 for a tiered target, 1 for the others.
func tieredRank(t bench.Target) int {
	if strings.HasPrefix(t.Name, "tiered-") {
		return 0
	}
	return 1
}

// privateReplicaEnv starts the servers of needs (a deployment with
// replicas first) for t alone, stopped at its end.
func privateReplicaEnv(t *testing.T, needs []string) *faults.Env {
	t.Helper()
	backendstest.SkipShort(t)
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	e, err := faults.Start(ctx, needs...)
	if err != nil {
		backendstest.Unavailable(t, err)
	}
	t.Cleanup(func() { e.Close() })
	return e
}
