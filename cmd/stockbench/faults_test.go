package main

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/stockguard/stockguard/bench"
	"github.com/stockguard/stockguard/bench/faults"
	"github.com/stockguard/stockguard/internal/backends/backendstest"
)

func TestRun_faultsUsage(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		want string // in stderr
	}{
		{"unknown fault", []string{"-faults", "cut,nope"}, `unknown fault "nope"`},
		{"no fault", []string{"-faults", ","}, "names no fault"},
		{"user's server", []string{"-faults", "cut", "-redis-addr", "127.0.0.1:6379"}, "-redis-addr with -faults"},
		{"several worker counts", []string{"-faults", "cut", "-workers", "4,8"}, "-workers N"},
		{"open loop", []string{"-faults", "cut", "-rate", "100"}, "-rate does not apply"},
		{"processes", []string{"-faults", "cut", "-workers", "8", "-procs", "2"}, "-procs does not apply"},
		{"csv", []string{"-faults", "cut", "-format", "csv"}, "-format csv"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, _, stderr := invoke(t, []bench.Target{memTarget()}, tc.args...)
			if code != exitUsage || !strings.Contains(stderr, tc.want) {
				t.Errorf("exit %d, stderr %q; want %d and %q", code, stderr, exitUsage, tc.want)
			}
		})
	}
}

// TestRun_faults runs one Redis strategy through a cut and a restart on
// private servers and reads the JSON report.
func TestRun_faults(t *testing.T) {
	backendstest.SkipShort(t)
	atomic, ok := bench.Lookup("redis-atomic")
	if !ok {
		t.Fatal("redis-atomic is not registered")
	}
	code, stdout, stderr := invoke(t, []bench.Target{atomic, memTarget()},
		"-faults", "cut,restart", "-workers", "8", "-duration", "800ms", "-format", "json")
	if code != exitOK {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
	if !strings.Contains(stderr, "skipped: mem needs none") {
		t.Errorf("stderr does not say mem (no backend) was skipped:\n%s", stderr)
	}
	var out struct {
		Meta struct {
			Faults []string `json:"faults"`
			Buyers int      `json:"buyers"`
		} `json:"meta"`
		Results []struct {
			Target   string `json:"strategy"`
			Fault    string `json:"fault"`
			Injected int    `json:"injected"`
			Ops      int64  `json:"ops"`
			Orders   bool   `json:"orders"`
		} `json:"results"`
	}
	if err := json.Unmarshal([]byte(stdout), &out); err != nil {
		t.Fatalf("%v\n%s", err, stdout)
	}
	if strings.Join(out.Meta.Faults, ",") != "cut,restart" || out.Meta.Buyers != 8 || len(out.Results) != 2 {
		t.Fatalf("meta %+v, %d results; want cut,restart, 8 buyers, 2 results", out.Meta, len(out.Results))
	}
	for _, r := range out.Results {
		if r.Target != "redis-atomic" || r.Injected == 0 || r.Ops == 0 || !r.Orders {
			t.Errorf("result %+v: want redis-atomic, struck, with calls, taking orders", r)
		}
	}
}

// TestWithReplicaTargets checks the default strategies of a fault run:
// with failover in the list, the strategies on replicas (on request
// otherwise) join them; without a fault of replicas, nothing changes.
func TestWithReplicaTargets(t *testing.T) {
	all := bench.Targets()
	def := slices.DeleteFunc(slices.Clone(all), func(t bench.Target) bool { return t.OnRequest })
	names := func(ts []bench.Target) []string {
		var out []string
		for _, t := range ts {
			out = append(out, t.Name)
		}
		return out
	}
	cut, _ := faults.Lookup("cut")
	if got := withReplicaTargets(def, cut, all); !slices.Equal(names(got), names(def)) {
		t.Errorf("-faults cut: %v, want the defaults %v", names(got), names(def))
	}
	fo, _ := faults.Lookup("cut,failover")
	got := names(withReplicaTargets(def, fo, all))
	for _, want := range []string{"redis-sentinel-atomic", "redis-sentinel-atomic-ack", "redis-atomic"} {
		if !slices.Contains(got, want) {
			t.Errorf("-faults cut,failover: %v lacks %s", got, want)
		}
	}
	if slices.Contains(got, "redis-cluster-atomic") || slices.Contains(got, "valkey-atomic") {
		t.Errorf("-faults cut,failover: %v takes strategies no fault of the list strikes", got)
	}
}
