package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stockguard/stockguard"
	"github.com/stockguard/stockguard/bench"
	"github.com/stockguard/stockguard/internal/backends/backendstest"
	"github.com/stockguard/stockguard/internal/memstock"
)

// TestMain also serves as the worker process of -procs runs, which
// re-execute the test binary.
func TestMain(m *testing.M) {
	if isWorker() {
		os.Exit(workerMain(context.Background(), os.Stdin, os.Stdout, bench.Backends()))
	}
	backendstest.Main(m)
}

// memTarget is the in-memory reference, needing no server.
func memTarget() bench.Target {
	return bench.Target{Name: "mem", About: "in-memory reference", Open: func(context.Context, bench.Servers, string) (*bench.Store, error) {
		s := memstock.New()
		return &bench.Store{New: func() (stockguard.Inventory, error) { return s, nil }}, nil
	}}
}

// racy reads, yields and writes the computed level: lost updates.
type racy struct {
	mu    sync.Mutex
	stock map[string]int64
}

func (r *racy) get(sku string) (int64, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	v, ok := r.stock[sku]
	return v, ok
}

func (r *racy) SetStock(_ context.Context, sku string, qty int64) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.stock[sku] = qty
	return nil
}

func (r *racy) Stock(_ context.Context, sku string) (int64, error) {
	v, ok := r.get(sku)
	if !ok {
		return 0, stockguard.ErrUnknownSKU
	}
	return v, nil
}

func (r *racy) Decrement(_ context.Context, sku string, qty int64) error {
	have, _ := r.get(sku)
	if have < qty {
		return stockguard.ErrInsufficientStock
	}
	runtime.Gosched()
	return r.SetStock(context.Background(), sku, have-qty)
}

// racyTarget is a broken in-memory target that does not say it is broken.
func racyTarget() bench.Target {
	return bench.Target{Name: "racy", About: "read, yield, write", Open: func(context.Context, bench.Servers, string) (*bench.Store, error) {
		s := &racy{stock: map[string]int64{}}
		return &bench.Store{New: func() (stockguard.Inventory, error) { return s, nil }}, nil
	}}
}

// brokenMem is memTarget labelled as a counterexample, to test selection.
func brokenMem() bench.Target {
	t := memTarget()
	t.Name, t.Counterexample = "broken-mem", true
	return t
}

// invoke runs the command with args on the given targets.
func invoke(t *testing.T, strategies []bench.Target, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errOut bytes.Buffer
	code = run(t.Context(), args, env{stdout: &out, stderr: &errOut, backends: bench.Backends(), strategies: strategies, counterexamples: []bench.Target{brokenMem()}})
	return code, out.String(), errOut.String()
}

// quick are flags for short runs that write no chart.
var quick = []string{"-duration", "100ms", "-warmup", "0", "-plot", ""}

func TestRun_usage(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		want string // in stderr
	}{
		{"unknown flag", []string{"-frobnicate"}, "flag provided but not defined"},
		{"positional argument", []string{"mysql-atomic"}, "unexpected argument"},
		{"unknown strategy", []string{"-strategies", "mem,nope"}, `unknown strategy "nope"; known: mem, racy`},
		{"empty strategy list", []string{"-strategies", ","}, "names no strategy"},
		{"counterexample without the flag", []string{"-strategies", "broken-mem"}, "add -counterexamples"},
		{"bad workers", []string{"-workers", "1,x"}, "-workers"},
		{"zero workers", []string{"-workers", "0"}, "-workers"},
		{"too many workers", []string{"-workers", "5000"}, "-workers"},
		{"bad skus", []string{"-skus", "0"}, "SKUs"},
		{"bad skew", []string{"-skew", "zipf:0.5"}, "above 1"},
		{"bad qty", []string{"-qty", "3-1"}, "qty"},
		{"bad workload", []string{"-workload", "bursty"}, "steady or flash"},
		{"negative duration", []string{"-duration", "-1s"}, "negative"},
		{"bad format", []string{"-format", "xml"}, "table, json or csv"},
		{"bad chart name", []string{"-plot", "out.gif"}, ".svg or .png"},
		{"bad dsn", []string{"-mysql-dsn", "not a dsn"}, "-mysql-dsn"},
		{"bad redis address", []string{"-redis-addr", "localhost"}, "host:port"},
		{"one redlock voter", []string{"-redlock-addrs", "127.0.0.1:7001"}, "want 2 addresses"},
		{"redlock voter is the stock's server", []string{"-redis-addr", "127.0.0.1:7001", "-redlock-addrs", "127.0.0.1:7001,127.0.0.1:7002"}, "other than -redis-addr"},
		{"duration without a unit", []string{"-duration", "3"}, "a duration needs its unit"},
		{"checkout with no Orders strategy", []string{"-workload", "checkout"}, "none of the chosen strategies implements stockguard.Orders"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, stdout, stderr := invoke(t, []bench.Target{memTarget(), racyTarget()}, tc.args...)
			// The package prefix of bench's errors is no help on a command line.
			if code != exitUsage || !strings.Contains(stderr, tc.want) || !strings.Contains(stderr, "stockbench -h") || stdout != "" || strings.Contains(stderr, ": bench: ") {
				t.Errorf("exit %d, stderr %q, stdout %q; want %d and %q", code, stderr, stdout, exitUsage, tc.want)
			}
		})
	}
}

// TestRun_help: help asked for is the output — on stdout, status 0 — and
// says how to get the real exit status past go run.
func TestRun_help(t *testing.T) {
	code, stdout, stderr := invoke(t, []bench.Target{memTarget()}, "-h")
	for _, want := range []string{"-strategies", "-mysql-dsn", "-redlock-addrs", "broken-mem", "Backends", "redlock", "Exit status", "go build -o stockbench"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("help lacks %q", want)
		}
	}
	if code != exitOK || stderr != "" {
		t.Errorf("exit %d, stderr %q, stdout %q", code, stderr, stdout)
	}
}

// The help with every registered target stays short enough to read, and
// names every backend; -list describes the targets it only names.
func TestRun_helpIsShort(t *testing.T) {
	var out, errOut bytes.Buffer
	all := env{stdout: &out, stderr: &errOut, backends: bench.Backends(), strategies: bench.Targets(), counterexamples: bench.Counterexamples()}
	if code := run(t.Context(), []string{"-h"}, all); code != exitOK {
		t.Fatalf("-h: exit %d, stderr %q", code, errOut.String())
	}
	help := out.String()
	if n := strings.Count(help, "\n"); n > 140 {
		t.Errorf("-h is %d lines, want at most 140", n)
	}
	for _, want := range []string{"MySQL/MariaDB, PostgreSQL and Redis", "postgres", "pg-batched", "-list"} {
		if !strings.Contains(help, want) {
			t.Errorf("-h lacks %q", want)
		}
	}
	out.Reset()
	if code := run(t.Context(), []string{"-list"}, all); code != exitOK {
		t.Fatalf("-list: exit %d, stderr %q", code, errOut.String())
	}
	for _, tg := range append(bench.Targets(), bench.Counterexamples()...) {
		if !strings.Contains(out.String(), tg.About) {
			t.Errorf("-list lacks %s's description", tg.Name)
		}
	}
}

// TestRun_unwritableChart fails before the run, not after it.
func TestRun_unwritableChart(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{filepath.Join(dir, "no-such-dir", "c.svg"), filepath.Join(file, "c.svg")} {
		// No "[1/1]": the run, announced as it starts, never began.
		code, stdout, stderr := invoke(t, []bench.Target{memTarget()}, "-duration", "10s", "-workers", "1", "-plot", path)
		if code != exitUsage || !strings.Contains(stderr, "cannot write the chart") || strings.Contains(stderr, "[1/1]") || stdout != "" {
			t.Errorf("%s: exit %d, stderr %q", path, code, stderr)
		}
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 1 {
		t.Errorf("the check left %v behind", entries)
	}
}

func TestRun_tableAndChart(t *testing.T) {
	chart := filepath.Join(t.TempDir(), "out.png")
	code, stdout, stderr := invoke(t, []bench.Target{memTarget()}, "-workers", "4,1", "-duration", "100ms", "-warmup", "10ms", "-plot", chart)
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	for _, want := range []string{"workload: steady, 1 hot SKU", "STRATEGY", "mem ", "audit: every strategy sound"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("stdout lacks %q:\n%s", want, stdout)
		}
	}
	if strings.Index(stdout, "mem              1") > strings.Index(stdout, "mem              4") {
		t.Errorf("worker counts not in order:\n%s", stdout)
	}
	if !strings.Contains(stderr, "[2/2] mem ×4") || !strings.Contains(stderr, "chart written") {
		t.Errorf("stderr %q", stderr)
	}
	if b, err := os.ReadFile(chart); err != nil || !bytes.HasPrefix(b, []byte("\x89PNG")) {
		t.Errorf("chart: %v, %d bytes", err, len(b))
	}
}

func TestRun_json(t *testing.T) {
	code, stdout, stderr := invoke(t, []bench.Target{memTarget()}, append(quick, "-format", "json", "-workers", "2", "-skus", "3", "-qty", "1-2")...)
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	var doc struct {
		Meta    bench.Meta       `json:"meta"`
		Results []map[string]any `json:"results"`
	}
	if err := json.Unmarshal([]byte(stdout), &doc); err != nil {
		t.Fatalf("%v:\n%s", err, stdout)
	}
	if m := doc.Meta; m.Workload.SKUs != 3 || m.Workload.Qty != "1-2" || !slices.Equal(m.Workload.Workers, []int{2}) || m.Seed != bench.DefaultWorkload().Seed ||
		m.GoVersion != runtime.Version() || m.Time.IsZero() || m.Servers == nil {
		t.Errorf("meta %+v", m)
	}
	rows := doc.Results
	if len(rows) != 1 {
		t.Fatalf("%d rows", len(rows))
	}
	for k, want := range map[string]any{"strategy": "mem", "workers": 2.0, "skus": 3.0, "oversold": 0.0, "lost": 0.0, "unknown": 0.0, "counterexample": false, "qty": "1-2"} {
		if rows[0][k] != want {
			t.Errorf("%s = %v, want %v", k, rows[0][k], want)
		}
	}
	for _, k := range []string{"throughput", "p50_ms", "p99_ms", "retries_per_op"} {
		if _, ok := rows[0][k].(float64); !ok {
			t.Errorf("%s = %v, want a number", k, rows[0][k])
		}
	}
}

func TestRun_csvFlash(t *testing.T) {
	code, stdout, stderr := invoke(t, []bench.Target{memTarget()}, append(quick, "-format", "csv", "-workload", "flash", "-stock", "50", "-workers", "4")...)
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	lines := strings.Split(strings.TrimSpace(stdout), "\n")
	if len(lines) != 2 || !strings.HasPrefix(lines[0], "strategy,") || !strings.HasPrefix(lines[1], "mem,false,none,flash,4,") {
		t.Errorf("csv:\n%s", stdout)
	}
}

// TestRun_unsound: a broken target that claims to be a strategy makes the
// command fail with status 3 and say so loudly.
func TestRun_unsound(t *testing.T) {
	code, stdout, stderr := invoke(t, []bench.Target{memTarget(), racyTarget()}, append(quick, "-workers", "8")...)
	if code != exitUnsound {
		t.Fatalf("exit %d, want %d; stderr %s", code, exitUnsound, stderr)
	}
	if !strings.Contains(stdout, "!!! UNSOUND: racy at 8 workers") || !strings.Contains(stderr, "UNSOUND: racy") {
		t.Errorf("stdout:\n%s\nstderr:\n%s", stdout, stderr)
	}
}

// TestRun_counterexampleNotFatal: a caught counterexample is the expected
// outcome, not a failure.
func TestRun_counterexampleNotFatal(t *testing.T) {
	var out, errOut bytes.Buffer
	broken := racyTarget()
	broken.Name, broken.Counterexample = "broken-racy", true
	code := run(t.Context(), append(quick, "-counterexamples", "-workers", "8"),
		env{stdout: &out, stderr: &errOut, backends: bench.Backends(), strategies: []bench.Target{memTarget()}, counterexamples: []bench.Target{broken}})
	if code != exitOK || !strings.Contains(out.String(), "broken-racy [broken]") || !strings.Contains(out.String(), "counterexamples: 1 of 1 caught") {
		t.Errorf("exit %d\n%s\n%s", code, out.String(), errOut.String())
	}
}

// TestRun_realCounterexampleMarkedReal runs a real counterexample against
// Redis as if it were a strategy: status 3.
func TestRun_realCounterexampleMarkedReal(t *testing.T) {
	addr := backendstest.SharedRedis(t).Addr
	ce, ok := bench.Lookup("broken-redis-check-then-act")
	if !ok {
		t.Fatal("counterexample not registered")
	}
	ce.Counterexample = false
	code, stdout, stderr := invoke(t, []bench.Target{ce}, "-redis-addr", addr, "-workers", "8", "-duration", "300ms", "-warmup", "0", "-plot", "")
	if code != exitUnsound || !strings.Contains(stdout, "UNSOUND: broken-redis-check-then-act") {
		t.Errorf("exit %d\n%s\n%s", code, stdout, stderr)
	}
}

// TestRun_strategies runs every registered strategy briefly through the
// servers the backends package provides, as the default command does.
func TestRun_strategies(t *testing.T) {
	dsn, addr := backendstest.SharedMySQL(t).DSN, backendstest.SharedRedis(t).Addr
	code, stdout, stderr := invoke(t, bench.Targets(), "-mysql-dsn", dsn, "-redis-addr", addr, "-workers", "1,16",
		"-duration", "150ms", "-warmup", "20ms", "-format", "json", "-plot", filepath.Join(t.TempDir(), "c.svg"))
	if code != exitOK {
		t.Fatalf("exit %d\n%s\n%s", code, stdout, stderr)
	}
	var doc bench.Report
	if err := json.Unmarshal([]byte(stdout), &doc); err != nil {
		t.Fatal(err)
	}
	rows := doc.Results
	if len(doc.Meta.Servers) < 2 {
		t.Errorf("meta servers %+v, want MySQL and Redis", doc.Meta.Servers)
	}
	// Strategies on request (other engines) run only when named.
	byDefault := slices.DeleteFunc(bench.Targets(), func(t bench.Target) bool { return t.OnRequest })
	if len(rows) != 2*len(byDefault) {
		t.Errorf("%d rows for %d strategies", len(rows), len(byDefault))
	}
	for _, r := range rows {
		// Acked, not Successes: on a loaded machine a slow strategy may
		// finish no request inside the 150ms window, but it must have sold
		// something over the whole run, and soundly.
		if !r.Sound || r.Acked == 0 || !r.RawChecked {
			t.Errorf("%s at %d workers: %+v", r.Strategy, r.Workers, r)
		}
	}
}

func TestRun_serverUnreachable(t *testing.T) {
	ce, _ := bench.Lookup("broken-redis-check-then-act")
	ce.Counterexample = false
	code, _, stderr := invoke(t, []bench.Target{ce}, append(quick, "-redis-addr", "127.0.0.1:1")...)
	if code != exitError || !strings.Contains(stderr, "127.0.0.1:1") {
		t.Errorf("exit %d, stderr %q", code, stderr)
	}
}

// TestRun_interrupted: an interrupt stops the run, reports what was
// measured (audited) and exits 1.
func TestRun_interrupted(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	time.AfterFunc(300*time.Millisecond, cancel)
	var out, errOut bytes.Buffer
	// An hour's run: only the interrupt can end it within the hang guard.
	exited := make(chan int, 1)
	go func() {
		exited <- run(ctx, []string{"-duration", "1h", "-workers", "1,8", "-plot", ""},
			env{stdout: &out, stderr: &errOut, backends: bench.Backends(), strategies: []bench.Target{memTarget()}})
	}()
	var code int
	select {
	case code = <-exited:
	case <-time.After(5 * time.Minute): // a hang guard only
		t.Fatal("the interrupt did not stop the run")
	}
	if code != exitError {
		t.Fatalf("exit %d", code)
	}
	if !strings.Contains(out.String(), "ok (interrupted)") || !strings.Contains(errOut.String(), "interrupted") || strings.Contains(errOut.String(), "[2/2]") {
		t.Errorf("stdout:\n%s\nstderr:\n%s", out.String(), errOut.String())
	}
}

// A default run leaves out an IfReachable target whose server cannot be
// had, with a note, and runs the rest; named with -strategies, the same
// target's unreachable server fails the run.
func TestRun_ifReachableDroppedInDefaultRun(t *testing.T) {
	pg, ok := bench.Lookup("pg-atomic")
	if !ok || !pg.IfReachable {
		t.Fatalf("pg-atomic registered=%v IfReachable=%v, want a default-run target", ok, pg.IfReachable)
	}
	dead := []string{"-postgres-dsn", "postgres://postgres@127.0.0.1:1/postgres?sslmode=disable&connect_timeout=1"}
	code, _, stderr := invoke(t, []bench.Target{memTarget(), pg}, append(quick, dead...)...)
	if code != exitOK || !strings.Contains(stderr, "pg-atomic left out") {
		t.Errorf("default run: exit %d, stderr %q; want the run to go on without pg-atomic", code, stderr)
	}
	code, _, stderr = invoke(t, []bench.Target{memTarget(), pg}, append(append(quick, "-strategies", "pg-atomic"), dead...)...)
	if code != exitError || !strings.Contains(stderr, "127.0.0.1") {
		t.Errorf("named: exit %d, stderr %q; want the run to fail", code, stderr)
	}
}

// unreadable is memTarget whose Stock always fails, as a store's does
// once its stock is below zero.
func unreadableTarget() bench.Target {
	return bench.Target{Name: "unreadable", About: "Stock always fails", Open: func(context.Context, bench.Servers, string) (*bench.Store, error) {
		s := memstock.New()
		return &bench.Store{New: func() (stockguard.Inventory, error) { return unreadableStock{s}, nil }}, nil
	}}
}

type unreadableStock struct{ *memstock.Store }

func (unreadableStock) Stock(context.Context, string) (int64, error) {
	return 0, errors.New("not a level")
}

// TestRun_auditFailedIsUnsound: an audit that cannot read the stock is
// unsound — FAILED in the table, sound: false in JSON, status 3 — never
// "ok".
func TestRun_auditFailedIsUnsound(t *testing.T) {
	code, stdout, stderr := invoke(t, []bench.Target{unreadableTarget()}, append(quick, "-workers", "2")...)
	if code != exitUnsound || !strings.Contains(stdout, "FAILED: audit incomplete") || !strings.Contains(stderr, "UNSOUND: unreadable") {
		t.Errorf("exit %d\n%s\n%s", code, stdout, stderr)
	}
	code, stdout, stderr = invoke(t, []bench.Target{unreadableTarget()}, append(quick, "-workers", "2", "-format", "json")...)
	var doc bench.Report
	if err := json.Unmarshal([]byte(stdout), &doc); err != nil {
		t.Fatal(err)
	}
	if code != exitUnsound || len(doc.Results) != 1 || doc.Results[0].Sound || doc.Results[0].AuditFailed == "" {
		t.Errorf("exit %d, rows %+v\n%s", code, doc.Results, stderr)
	}
}

// TestRun_brokenStrategiesExit3 runs each broken strategy on Redis (those
// wrapped around redis-atomic, each wrong on one path, among them),
// billed as a strategy, through the default workload (the default
// checkout for the order ones), as a count of requests so that their
// counter-keyed faults show on any machine: the command exits 3 for every
// one.
func TestRun_brokenStrategiesExit3(t *testing.T) {
	addr := backendstest.SharedRedis(t).Addr
	for _, ce := range bench.Counterexamples() {
		if !strings.HasPrefix(ce.Name, "broken-redis-") && !(strings.HasPrefix(ce.Name, "broken-checkout-") && slices.Equal(ce.Needs, []string{"redis"})) {
			continue
		}
		t.Run(ce.Name, func(t *testing.T) {
			ce.Counterexample = false
			args := []string{"-redis-addr", addr, "-workers", "8", "-ops", "3000", "-warmup", "0", "-plot", ""}
			if ce.OrdersOnly {
				args = []string{"-redis-addr", addr, "-workers", "8", "-ops", "800", "-warmup", "0", "-plot", "", "-workload", "checkout"}
			}
			code, stdout, stderr := invoke(t, []bench.Target{ce}, args...)
			if code != exitUnsound || !strings.Contains(stderr, "UNSOUND: "+ce.Name) {
				t.Errorf("exit %d, want %d\n%s\n%s", code, exitUnsound, stdout, stderr)
			}
		})
	}
}
