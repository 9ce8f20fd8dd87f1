package bench

import (
	"bytes"
	"image/png"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// sweepResults are a closed-loop peak and an open-loop sweep for two
// targets: one keeps up to 20k/s, the other falls behind past 5k/s.
func sweepResults() []*Result {
	var rs []*Result
	for _, tc := range []struct {
		target string
		needs  []string
		peak   float64
	}{{"fast", []string{"redis"}, 25_000}, {"slow", []string{"mysql"}, 6_000}} {
		w := DefaultWorkload()
		w.Workers = 16
		rs = append(rs, &Result{Target: tc.target, Needs: tc.needs, Workload: w, Procs: 1, AttemptRate: tc.peak, Latency: Latency{P99: time.Millisecond}})
		for _, rate := range []float64{1_000, 5_000, 10_000, 20_000} {
			w.Rate = rate
			sent, p99 := rate, 500*time.Microsecond
			if rate > tc.peak*0.9 {
				sent, p99 = tc.peak, 800*time.Millisecond
			}
			rs = append(rs, &Result{Target: tc.target, Needs: tc.needs, Workload: w, Procs: 1, AttemptRate: sent, Latency: Latency{P99: p99}})
		}
	}
	return rs
}

func TestWriteSweepChart(t *testing.T) {
	dir := t.TempDir()
	if out := os.Getenv("STOCKBENCH_CHART_DIR"); out != "" {
		dir = out // to look at the sample chart
	}
	for _, f := range []ChartFormat{SVG, PNG} {
		var b bytes.Buffer
		if err := WriteSweepChart(&b, sweepResults(), 10*time.Millisecond, f); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "sweep."+string(f)), b.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
		switch f {
		case SVG:
			for _, want := range []string{"<svg", "offered requests/s", "p99 latency from the intended start", "fast ×16 (closed 25k/s)",
				"slow ×16 (closed 6k/s)", "p99 bound (-slo 10ms)", "coordinated-omission corrected"} {
				if !strings.Contains(b.String(), want) {
					t.Errorf("svg lacks %q", want)
				}
			}
		case PNG:
			img, err := png.Decode(&b)
			if err != nil {
				t.Fatal(err)
			}
			if sz := img.Bounds().Size(); sz.X < 1000 || sz.Y < 400 {
				t.Errorf("png is %v", sz)
			}
		}
	}
}

func TestWriteSweepChart_refusesBadInput(t *testing.T) {
	closedOnly := sweepResults()[:1]
	if err := WriteSweepChart(&bytes.Buffer{}, closedOnly, 0, SVG); err == nil {
		t.Error("closed-loop results only accepted")
	}
	if err := WriteSweepChart(&bytes.Buffer{}, sweepResults(), 0, "gif"); err == nil {
		t.Error("gif accepted")
	}
}
