package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log"
	"slices"
	"strings"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/stockguard/stockguard/bench"
	"github.com/stockguard/stockguard/bench/faults"
	"github.com/stockguard/stockguard/bench/replicatargets"
)

// faultConfig is a fault run's settings (-faults): nil list for none.
type faultConfig struct {
	list     []faults.Fault
	buyers   int
	duration time.Duration
}

func faultNames() []string { return faults.Names() }

// serverFlags name servers of the user's: a fault run pauses, kills and
// restarts its servers, so it starts its own.
var serverFlags = []string{"mysql-dsn", "redis-addr", "redlock-addrs"}

// parseFaults reads -faults and the flags that shape a fault run: one
// worker count (-workers N, the buyers; default faults.DefaultBuyers) and
// -duration (default faults.DefaultDuration per strategy and fault).
func parseFaults(list string, set map[string]bool, workers []int, duration time.Duration, format string) (faultConfig, error) {
	fl, err := faults.Lookup(list)
	if err != nil {
		return faultConfig{}, usageError{strings.TrimPrefix(err.Error(), "faults: ")}
	}
	for _, f := range serverFlags {
		if set[f] {
			return faultConfig{}, usagef("-%s with -faults: a fault run pauses, kills and restarts its servers, so it starts private ones", f)
		}
	}
	for _, f := range []string{"rate", "slo", "ops", "workload", "procs"} {
		if set[f] {
			return faultConfig{}, usagef("-%s does not apply to -faults (closed-loop buyers for -duration)", f)
		}
	}
	if format == "csv" {
		return faultConfig{}, usagef("-format csv does not apply to -faults: table or json")
	}
	fc := faultConfig{list: fl, buyers: faults.DefaultBuyers, duration: faults.DefaultDuration}
	if set["workers"] {
		if len(workers) != 1 {
			return faultConfig{}, usagef("-faults runs one number of buyers: -workers N")
		}
		fc.buyers = workers[0]
	}
	if set["duration"] {
		fc.duration = duration
	}
	return fc, nil
}

// withReplicaTargets adds to the default targets, when a fault of the list
// strikes replicas (failover, partition-master), the targets it applies to,
// which run only on request otherwise: -faults failover alone means the
// strategies on Sentinel, with and without a replica's acknowledgement.
// Those on Cluster (a failover there takes twice as long) run when named:
// -strategies 'redis-cluster-*'.
func withReplicaTargets(targets []bench.Target, list []faults.Fault, all []bench.Target) []bench.Target {
	if !slices.ContainsFunc(list, faults.Fault.Replicas) {
		return targets
	}
	out := slices.Clone(targets)
	for _, t := range all {
		if t.OnRequest && !slices.Contains(t.Needs, replicatargets.ClusterName) &&
			!slices.ContainsFunc(out, func(o bench.Target) bool { return o.Name == t.Name }) &&
			slices.ContainsFunc(list, func(f faults.Fault) bool { return f.Replicas() && faults.Applies(f, t) }) {
			out = append(out, t)
		}
	}
	return out
}

// runFaults runs every chosen strategy through every chosen fault on
// private servers and reports each run; it returns the exit status: 3 when
// a strategy oversold, lost or duplicated a unit, 1 when a run found any
// other problem or could not run.
func runFaults(ctx context.Context, c config, e env) int {
	// The driver logs every connection the faults break; the runs report
	// what the strategies made of it.
	mysql.SetLogger(log.New(io.Discard, "", 0))
	fc := c.faults
	var targets []bench.Target
	var need, inapplicable []string
	for _, t := range c.targets {
		if len(t.Needs) == 0 || slices.ContainsFunc(t.Needs, func(n string) bool { return !slices.Contains(faults.Backends(), n) }) {
			fmt.Fprintf(e.stderr, "stockbench: skipped: %s needs %s; -faults strikes private servers for %s only\n",
				t.Name, needsText(t.Needs), strings.Join(faults.Backends(), ", "))
			continue
		}
		if !slices.ContainsFunc(fc.list, func(f faults.Fault) bool { return faults.Applies(f, t) }) {
			inapplicable = append(inapplicable, t.Name)
			continue
		}
		targets = append(targets, t)
		for _, n := range t.Needs {
			if !slices.Contains(need, n) {
				need = append(need, n)
			}
		}
	}
	if len(inapplicable) > 0 {
		fmt.Fprintf(e.stderr, "stockbench: skipped, no fault of the list applies (failover and partition-master strike the strategies on replicas, the others those on single servers): %s\n",
			strings.Join(inapplicable, ", "))
	}
	if len(targets) == 0 {
		fmt.Fprintf(e.stderr, "stockbench: no strategy can run on the private servers of -faults\n")
		return exitError
	}
	runs := 0
	for _, t := range targets {
		for _, f := range fc.list {
			if faults.Applies(f, t) {
				runs++
			}
		}
	}
	fmt.Fprintf(e.stderr, "stockbench: %d strategies × %d faults, %d buyers, at least %v each: about %v plus set-up\n",
		len(targets), len(fc.list), fc.buyers, fc.duration, time.Duration(runs)*fc.duration*5/4)
	env, err := faults.Start(ctx, need...)
	if err != nil {
		fmt.Fprintf(e.stderr, "stockbench: %v\n", err)
		return exitError
	}
	defer env.Close()
	for _, s := range env.Servers() {
		fmt.Fprintf(e.stderr, "stockbench: %s\n", s)
	}

	var reps []*faults.Report
	failed := false
	p := newProgress(e.stderr, runs)
runs:
	for _, t := range targets {
		for _, f := range fc.list {
			if !faults.Applies(f, t) {
				continue
			}
			p.start(t.Name + " / " + f.Name)
			rep, err := faults.Run(ctx, env, t, f, faults.Config{Buyers: fc.buyers, Duration: fc.duration, Seed: c.workload.Seed})
			p.done()
			if err != nil {
				p.printf("stockbench: %s under %s: %v\n", t.Name, f.Name, err)
				failed = true
				continue
			}
			reps = append(reps, rep)
			if ctx.Err() != nil {
				p.printf("stockbench: interrupted; reporting the runs so far\n")
				failed = true
				break runs
			}
		}
	}
	p.finish()

	if err := writeFaults(e.stdout, c, fc, env.Servers(), reps); err != nil {
		fmt.Fprintf(e.stderr, "stockbench: writing the report: %v\n", err)
		failed = true
	}
	code := exitOK
	for _, r := range reps {
		switch {
		case r.Counterexample:
		case !r.Sound():
			fmt.Fprintf(e.stderr, "stockbench: UNSOUND: %s under %s — see the report above\n", r.Target, r.Fault)
			code = exitUnsound
		case !r.OK() && code == exitOK:
			code = exitError
		}
	}
	if code == exitOK && failed {
		code = exitError
	}
	return code
}

// needsText joins backend names with "+", "none" for none.
func needsText(needs []string) string {
	if len(needs) == 0 {
		return "none"
	}
	return strings.Join(needs, "+")
}

// faultsJSON is -format json of a fault run.
type faultsJSON struct {
	Meta    faultsMeta       `json:"meta"`
	Results []*faults.Report `json:"results"`
}

type faultsMeta struct {
	Faults   []string      `json:"faults"`
	Buyers   int           `json:"buyers"`
	Duration time.Duration `json:"duration_ns"`
	Seed     uint64        `json:"seed"`
	Servers  []string      `json:"servers"`
}

// writeFaults writes the fault runs as a table, or as JSON with the run's
// settings ({"meta": …, "results": […]}).
func writeFaults(w io.Writer, c config, fc faultConfig, servers []string, reps []*faults.Report) error {
	var names []string
	for _, f := range fc.list {
		names = append(names, f.Name)
	}
	if c.format == "json" {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(faultsJSON{
			Meta:    faultsMeta{Faults: names, Buyers: fc.buyers, Duration: fc.duration, Seed: c.workload.Seed, Servers: servers},
			Results: reps,
		})
	}
	fmt.Fprintf(w, "faults: %s; %d buyers over 2 app instances, each run at least %v, the fault from a quarter of it; seed %d\n",
		strings.Join(names, ", "), fc.buyers, fc.duration, c.workload.Seed)
	fmt.Fprintf(w, "servers: %s\n\n", strings.Join(servers, "; "))
	return faults.WriteTable(w, reps)
}
