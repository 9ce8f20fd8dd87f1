package bench

import (
	"bytes"
	"encoding/csv"
	"encoding/json"
	"image/png"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// sampleResults are hand-made results: two sound strategies at three worker
// counts, an unsound one, and a caught counterexample.
func sampleResults() []*Result {
	var rs []*Result
	add := func(name string, broken bool, workers int, thr float64, p99 time.Duration, a Audit) {
		w := DefaultWorkload()
		w.Workers = workers
		rs = append(rs, &Result{
			Target: name, Counterexample: broken, Workload: w, Elapsed: 2 * time.Second,
			Attempts: int64(thr * 2), Successes: int64(thr * 2), Throughput: thr, AttemptRate: thr,
			Latency: Latency{P50: p99 / 4, P90: p99 / 2, P99: p99, P999: 2 * p99, Max: 3 * p99, Mean: p99 / 3},
			Errors:  map[string]int64{"contention": int64(workers)},
			Audit:   a,
		})
	}
	ok := Audit{Initial: 1000, Acked: 10, Gone: 10, Raw: true}
	for _, n := range []int{1, 8, 64} {
		add("fast", false, n, 20000*float64(n)/(1+float64(n)/8), 50*time.Microsecond*time.Duration(n), ok)
		add("slow", false, n, 300, time.Millisecond*time.Duration(n), ok)
		add("broken-thing", true, n, 5000, 2*time.Millisecond, Audit{Oversold: int64(n - 1), Acked: 100, Problems: []string{"sku-0: OVERSOLD"}})
	}
	rs = append(rs, &Result{Target: "liar", Workload: DefaultWorkload(), Errors: map[string]int64{"other": 3}, OtherErrors: []string{"boom"},
		Throughput: 1000, Latency: Latency{P99: time.Millisecond},
		Audit: Audit{Lost: 4, Problems: []string{"sku-0: LOST 4"}}})
	return rs
}

func TestWriteTable(t *testing.T) {
	var b bytes.Buffer
	if err := WriteTable(&b, sampleResults()); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, want := range []string{
		"STRATEGY", "P99 ms", "broken-thing [broken]", "CAUGHT: oversold 7", "UNSOUND: lost 4",
		"!!! UNSOUND: liar at 8 workers", "sku-0: LOST 4", "audit: 1 UNSOUND result(s) — do not use: liar",
		"counterexamples: 1 of 1 caught", "not caught (1 worker: no race)", "errors outside the contract: liar", "contention 64",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "SOLD OUT") {
		t.Error("sell-out column on a steady run")
	}
}

func TestWriteJSON(t *testing.T) {
	var b bytes.Buffer
	if err := WriteJSON(&b, sampleResults()); err != nil {
		t.Fatal(err)
	}
	var rows []map[string]any
	if err := json.Unmarshal(b.Bytes(), &rows); err != nil {
		t.Fatal(err)
	}
	if len(rows) != 10 {
		t.Fatalf("%d rows", len(rows))
	}
	for _, k := range []string{"strategy", "workers", "skus", "throughput", "p50_ms", "p99_ms", "retries_per_op", "oversold", "lost", "unknown", "counterexample", "sound"} {
		if _, ok := rows[0][k]; !ok {
			t.Errorf("row lacks %q: %v", k, rows[0])
		}
	}
	if rows[2]["counterexample"] != true || rows[9]["sound"] != false || rows[9]["lost"] != 4.0 {
		t.Errorf("rows %v / %v", rows[2], rows[9])
	}
}

func TestWriteCSV(t *testing.T) {
	var b bytes.Buffer
	if err := WriteCSV(&b, sampleResults()); err != nil {
		t.Fatal(err)
	}
	recs, err := csv.NewReader(&b).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != 11 || len(recs[0]) != len(csvHeader) || recs[4][0] != "fast" || recs[4][4] != "8" || recs[4][22] != "contention=8" {
		t.Errorf("csv %q", recs[:5])
	}
}

func TestWriteChart(t *testing.T) {
	dir := t.TempDir()
	if out := os.Getenv("STOCKBENCH_CHART_DIR"); out != "" {
		dir = out // to look at the sample chart
	}
	for _, f := range []ChartFormat{SVG, PNG} {
		var b bytes.Buffer
		if err := WriteChart(&b, sampleResults(), f); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "sample."+string(f)), b.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
		switch f {
		case SVG:
			for _, want := range []string{"<svg", "Successful decrements/s", "p99 latency", "broken-thing [broken]", "liar [UNSOUND]", "workers"} {
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
	if err := WriteChart(&bytes.Buffer{}, sampleResults(), "gif"); err == nil {
		t.Error("gif accepted")
	}
	if err := WriteChart(&bytes.Buffer{}, nil, SVG); err == nil {
		t.Error("empty results accepted")
	}
}
