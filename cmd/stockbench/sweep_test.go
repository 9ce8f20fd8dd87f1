package main

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stockguard/stockguard/bench"
)

func TestParseRates(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want []rateSpec
	}{
		{"", []rateSpec{{}}},
		{"2000", []rateSpec{{perSecond: 2000}}},
		{"80%, 50%,1000,500,50%", []rateSpec{{}, {ofPeak: 0.5}, {ofPeak: 0.8}, {perSecond: 500}, {perSecond: 1000}}},
	} {
		got, err := parseRates(tc.in)
		if err != nil || !slices.Equal(got, tc.want) {
			t.Errorf("parseRates(%q) = %v, %v; want %v", tc.in, got, err, tc.want)
		}
	}
	for _, bad := range []string{"x", "0", "-5", "0%", "2000%", "1e9", "1000,,2000"} {
		if _, err := parseRates(bad); err == nil {
			t.Errorf("parseRates(%q) accepted", bad)
		}
	}
}

func TestRun_loadInHeader(t *testing.T) {
	code, stdout, stderr := invoke(t, []bench.Target{memTarget()}, append(quick, "-workers", "2")...)
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	if !strings.Contains(stdout, "\nload: closed-loop: each worker sends its next request when the previous one returns") || strings.Contains(stdout, "OFFERED/S") {
		t.Errorf("closed-loop header:\n%s", stdout)
	}
}

// TestRun_rateSweep runs the reference closed-loop for its peak, then
// open-loop at a fraction of it and at a fixed rate, and holds them to an
// SLO.
func TestRun_rateSweep(t *testing.T) {
	chart := filepath.Join(t.TempDir(), "sweep.svg")
	code, stdout, stderr := invoke(t, []bench.Target{memTarget()}, "-duration", "100ms", "-warmup", "0", "-plot", chart,
		"-workers", "2", "-rate", "1%,2000", "-slo", "10ms", "-format", "table")
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	for _, want := range []string{
		"load: closed-loop first (the peak), then open-loop at 1% of peak, 2,000 requests/s per run",
		"coordinated omission corrected", "OFFERED/S", "   closed  ", "2,000",
		"slo: highest offered rate with p99 ≤ 10ms", "  mem ×2: ",
	} {
		if !strings.Contains(stdout, want) {
			t.Errorf("stdout lacks %q:\n%s", want, stdout)
		}
	}
	if !strings.Contains(stderr, "[3/3] mem ×2 @2,000/s") {
		t.Errorf("stderr %q", stderr)
	}
	// The chart is the sweep's: latency against the offered rate.
	if b, err := os.ReadFile(chart); err != nil || !bytes.Contains(b, []byte("offered requests/s")) || !bytes.Contains(b, []byte("p99 bound (-slo 10ms)")) {
		t.Errorf("chart: %v, %d bytes", err, len(b))
	}
}

func TestRun_rateUsage(t *testing.T) {
	for _, args := range [][]string{{"-rate", "fast"}, {"-rate", "0"}, {"-slo", "10ms"}, {"-rate", "100", "-slo", "-1ms"}} {
		code, _, stderr := invoke(t, []bench.Target{memTarget()}, append(quick, args...)...)
		if code != exitUsage || !strings.Contains(stderr, args[len(args)-2]) {
			t.Errorf("%q: exit %d, stderr %s", args, code, stderr)
		}
	}
}
