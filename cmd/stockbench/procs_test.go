package main

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/stockguard/stockguard/bench"
	"github.com/stockguard/stockguard/internal/backends"
	"github.com/stockguard/stockguard/internal/backends/backendstest"
)

// TestRun_procs starts private MariaDB and Redis servers as the command
// does with nothing configured, and runs the in-process-mutex
// counterexample — billed as a strategy — and two real strategies in one
// process and in two worker processes (this test binary re-executed), one
// app instance per process. One process of one instance holds the mutex
// for everyone: sound. Two processes hold one each, the JVM lock across two
// servers: oversold, caught, exit 3. The real strategies audit clean over
// both processes' workers.
func TestRun_procs(t *testing.T) {
	backendstest.SkipShort(t)
	t.Setenv(backends.EnvMySQLDSN, "")
	t.Setenv(backends.EnvRedisAddr, "")
	t.Setenv(backends.EnvBackend, string(backends.SourceLocal))
	var targets []bench.Target
	for _, name := range []string{"broken-local-mutex", "mysql-atomic", "redis-batched"} {
		tg, ok := bench.Lookup(name)
		if !ok {
			t.Fatalf("%s is not registered", name)
		}
		tg.Counterexample = false
		targets = append(targets, tg)
	}
	code, stdout, stderr := invoke(t, targets, "-procs", "1,2", "-instances", "1", "-workers", "8",
		"-duration", "500ms", "-warmup", "50ms", "-format", "json", "-plot", "")
	if strings.Contains(stderr, "no server available") {
		backendstest.Unavailable(t, errors.New(stderr))
	}
	if code != exitUnsound {
		t.Fatalf("exit %d, want %d (the mutex across processes oversold)\n%s", code, exitUnsound, stderr)
	}
	var doc bench.Report
	if err := json.Unmarshal([]byte(stdout), &doc); err != nil {
		t.Fatalf("%v:\n%s", err, stdout)
	}
	for _, s := range doc.Meta.Servers {
		if s.Source != string(backends.SourceLocal) {
			t.Errorf("server %v, want a private one", s)
		}
	}
	seen := map[string]bool{}
	for _, r := range doc.Results {
		key := r.Strategy + map[int]string{1: " in 1 process", 2: " in 2 processes"}[r.Procs]
		seen[key] = true
		wantSound := r.Strategy != "broken-local-mutex" || r.Procs == 1
		if r.Sound != wantSound || r.Acked == 0 || !r.RawChecked || r.Attempts == 0 {
			t.Errorf("%s: sound %v (want %v), acked %d, raw checked %v, %d attempts; problems %q",
				key, r.Sound, wantSound, r.Acked, r.RawChecked, r.Attempts, r.Problems)
		}
		if !r.Sound && r.Oversold == 0 {
			t.Errorf("%s: unsound without overselling: %+v", key, r)
		}
	}
	if len(seen) != 6 {
		t.Errorf("runs %v, want each strategy in 1 and 2 processes", seen)
	}
}

func TestRun_procsUsage(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"-procs", "0"}, "-procs"},
		{[]string{"-procs", "x"}, "-procs"},
		{[]string{"-procs", "65", "-workers", "100"}, "-procs"},
		{[]string{"-procs", "1,4", "-workers", "2,8"}, "4 processes for 2 workers"},
		{[]string{"-procs", "2", "-workers", "4", "-workload", "checkout"}, "a checkout runs in one process"},
		{[]string{"-procs", "2", "-workers", "4", "-claim-idle", "-1s"}, "-claim-idle"},
		{[]string{"-procs", "2", "-workers", "4", "-claim-idle", "10us"}, "-claim-idle"},
	} {
		code, _, stderr := invoke(t, []bench.Target{memTarget()}, append(quick, tc.args...)...)
		if code != exitUsage || !strings.Contains(stderr, tc.want) {
			t.Errorf("%q: exit %d, stderr %s", tc.args, code, stderr)
		}
	}
}

// TestRun_procsSkipsInProcessTargets: a target whose store lives in one
// process runs at -procs 1 and is skipped, not failed, at 2.
func TestRun_procsSkipsInProcessTargets(t *testing.T) {
	code, stdout, stderr := invoke(t, []bench.Target{memTarget()}, append(quick, "-procs", "1,2", "-workers", "2")...)
	if code != exitOK || !strings.Contains(stdout, "skipped: mem keeps its stock inside one process") || !strings.Contains(stdout, "mem ") {
		t.Errorf("exit %d\n%s\n%s", code, stdout, stderr)
	}
}
