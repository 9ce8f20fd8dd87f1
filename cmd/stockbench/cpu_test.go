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

// TestRun_cpuAndRTT runs a Redis strategy (CPU from INFO cpu) and a MySQL
// one on a MariaDB the command starts itself (CPU from its process) across
// a 2ms round trip: every result carries both CPU figures per request, and
// no request returns sooner than the round trip. Only lower bounds are
// checked — how much longer a request takes depends on the machine. The
// same across worker processes (-procs).
func TestRun_cpuAndRTT(t *testing.T) {
	backendstest.SkipShort(t)
	t.Setenv(backends.EnvMySQLDSN, "")
	t.Setenv(backends.EnvBackend, string(backends.SourceLocal))
	redisAtomic, ok1 := bench.Lookup("redis-atomic")
	mysqlAtomic, ok2 := bench.Lookup("mysql-atomic")
	if !ok1 || !ok2 {
		t.Fatal("redis-atomic or mysql-atomic is not registered")
	}
	addr := backendstest.SharedRedis(t).Addr
	code, stdout, stderr := invoke(t, []bench.Target{redisAtomic, mysqlAtomic}, "-redis-addr", addr, "-rtt", "2ms",
		"-ops", "400", "-workers", "4", "-warmup", "0", "-format", "json", "-plot", "")
	if code != exitOK {
		if strings.Contains(stderr, "no server available") {
			backendstest.Unavailable(t, errors.New(stderr))
		}
		t.Fatalf("exit %d\n%s\n%s", code, stdout, stderr)
	}
	var doc bench.Report
	if err := json.Unmarshal([]byte(stdout), &doc); err != nil {
		t.Fatal(err)
	}
	if doc.Meta.RTTMs != 2 {
		t.Errorf("meta rtt_ms %v, want 2", doc.Meta.RTTMs)
	}
	if len(doc.Results) != 2 {
		t.Fatalf("%d results, want 2:\n%s", len(doc.Results), stdout)
	}
	for _, r := range doc.Results {
		if !r.Sound || r.Attempts != 400 {
			t.Errorf("%s: sound %v, %d attempts, want 400", r.Strategy, r.Sound, r.Attempts)
		}
		// A closed-loop request's latency runs from the end of the one
		// before: one round trip at the least.
		if r.P50Ms < 2 {
			t.Errorf("%s: p50 %vms across a 2ms round trip", r.Strategy, r.P50Ms)
		}
		if r.ClientCPUUsPerOp == nil || *r.ClientCPUUsPerOp <= 0 {
			t.Errorf("%s: client_cpu_us_per_op %v, want a positive figure", r.Strategy, r.ClientCPUUsPerOp)
		}
		if len(r.ServerCPU) != 1 || r.ServerCPU[0].Error != "" || r.ServerCPUUsPerOp == nil || r.ServerCPU[0].UsPerOp == nil ||
			*r.ServerCPU[0].UsPerOp != *r.ServerCPUUsPerOp {
			t.Fatalf("%s: server_cpu_us_per_op %v, per server %+v", r.Strategy, r.ServerCPUUsPerOp, r.ServerCPU)
		}
		switch r.Strategy {
		case "redis-atomic":
			// INFO cpu counts microseconds: 400 scripts cost some.
			if r.ServerCPU[0].From != bench.CPUFromInfo || *r.ServerCPUUsPerOp <= 0 {
				t.Errorf("redis-atomic: server CPU %v from %q, want a positive figure from INFO cpu", *r.ServerCPUUsPerOp, r.ServerCPU[0].From)
			}
		case "mysql-atomic":
			// /proc counts 10ms ticks, which 400 updates may not reach.
			if r.ServerCPU[0].From != bench.CPUFromProcess || *r.ServerCPUUsPerOp < 0 {
				t.Errorf("mysql-atomic: server CPU %v from %q, want a figure from the process", *r.ServerCPUUsPerOp, r.ServerCPU[0].From)
			}
		}
	}

	// In worker processes each puts the round trip between itself and the
	// servers; their CPU times add up, the servers' are not measured.
	code, stdout, stderr = invoke(t, []bench.Target{redisAtomic}, "-redis-addr", addr, "-rtt", "2ms", "-procs", "2",
		"-ops", "200", "-workers", "4", "-warmup", "0", "-format", "json", "-plot", "")
	if code != exitOK {
		t.Fatalf("-procs 2: exit %d\n%s\n%s", code, stdout, stderr)
	}
	doc = bench.Report{}
	if err := json.Unmarshal([]byte(stdout), &doc); err != nil {
		t.Fatal(err)
	}
	if len(doc.Results) != 1 {
		t.Fatalf("-procs 2: %d results, want 1", len(doc.Results))
	}
	if r := doc.Results[0]; r.Procs != 2 || r.P50Ms < 2 || r.ClientCPUUsPerOp == nil || *r.ClientCPUUsPerOp <= 0 || r.ServerCPUUsPerOp != nil {
		t.Errorf("-procs 2: %d processes, p50 %vms, client CPU %v, server CPU %v; want 2, ≥ 2ms, positive, absent",
			r.Procs, r.P50Ms, r.ClientCPUUsPerOp, r.ServerCPUUsPerOp)
	}

	// A server named by its address, not a Redis: measured no CPU, says so.
	dsn := backendstest.SharedMySQL(t).DSN
	code, stdout, stderr = invoke(t, []bench.Target{mysqlAtomic}, "-mysql-dsn", dsn, "-ops", "100", "-workers", "2", "-warmup", "0", "-plot", "")
	if code != exitOK {
		t.Fatalf("exit %d\n%s\n%s", code, stdout, stderr)
	}
	if !strings.Contains(stdout, "SERVER CPU µs/op") || !strings.Contains(stdout, bench.CPUNotReadable) {
		t.Errorf("table does not say the server's CPU was not measured:\n%s", stdout)
	}
}
