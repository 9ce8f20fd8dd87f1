package bench

import (
	"bytes"
	"encoding/csv"
	"encoding/json"
	"image/color"
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
	if !strings.Contains(out, "DECR/S: successful requests per second") || !strings.Contains(out, "ATTEMPTS/S: every request per second") {
		t.Errorf("table lacks the legend of its columns:\n%s", out)
	}
}

func TestWriteTable_flashLegend(t *testing.T) {
	rs := sampleResults()
	for _, r := range rs {
		r.Workload.Shape, r.SoldOut, r.SellOut = Flash, true, 40*time.Millisecond
	}
	var b bytes.Buffer
	if err := WriteTable(&b, rs); err != nil {
		t.Fatal(err)
	}
	if out := b.String(); !strings.Contains(out, "SOLD OUT") || !strings.Contains(out, "In a flash run DECR/S is over the time to sell out") {
		t.Errorf("flash table:\n%s", out)
	}
}

func TestWriteJSON(t *testing.T) {
	var b bytes.Buffer
	w := DefaultWorkload()
	began := time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)
	servers := []Server{{Backend: "redis", Product: "Redis", Version: "7.0.15", Addr: "127.0.0.1:6379", Source: "env"}}
	if err := WriteJSON(&b, NewMeta(began, w, []int{1, 8, 64}, servers), sampleResults()); err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Meta    map[string]any   `json:"meta"`
		Results []map[string]any `json:"results"`
	}
	if err := json.Unmarshal(b.Bytes(), &doc); err != nil {
		t.Fatal(err)
	}
	m := doc.Meta
	if m["time"] != "2025-01-02T03:04:05Z" || m["seed"] != float64(w.Seed) || m["go_version"] == "" || m["module_version"] == "" {
		t.Errorf("meta %v", m)
	}
	if wl, _ := m["workload"].(map[string]any); wl["shape"] != "steady" || wl["skus"] != 1.0 || len(wl["workers"].([]any)) != 3 {
		t.Errorf("meta workload %v", m["workload"])
	}
	if sv, _ := m["servers"].([]any); len(sv) != 1 || sv[0].(map[string]any)["version"] != "7.0.15" {
		t.Errorf("meta servers %v", m["servers"])
	}
	rows := doc.Results
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

// TestWriteChart_flashChartsSellOut: a flash sale's first panel is the time
// to sell out.
func TestWriteChart_flashChartsSellOut(t *testing.T) {
	rs := sampleResults()
	for _, r := range rs {
		r.Workload.Shape, r.SoldOut, r.SellOut = Flash, true, time.Duration(r.Workload.Workers)*time.Millisecond
	}
	var b bytes.Buffer
	if err := WriteChart(&b, rs, SVG); err != nil {
		t.Fatal(err)
	}
	if out := b.String(); !strings.Contains(out, "Time to sell out") || strings.Contains(out, "Successful decrements/s") {
		t.Error("flash chart does not chart the time to sell out")
	}
}

// TestWriteChart_legendFits: a long label widens the chart instead of
// running off its edge.
func TestWriteChart_legendFits(t *testing.T) {
	width := func(rs []*Result) int {
		var b bytes.Buffer
		if err := WriteChart(&b, rs, PNG); err != nil {
			t.Fatal(err)
		}
		img, err := png.Decode(&b)
		if err != nil {
			t.Fatal(err)
		}
		return img.Bounds().Dx()
	}
	short := width(sampleResults())
	rs := sampleResults()
	rs[2].Target = "broken-redis-a-counterexample-with-a-very-long-name"
	if long := width(rs); long <= short {
		t.Errorf("chart %dpx wide with a long label, %dpx without", long, short)
	}
}

// TestColourFor_onePerStrategy: a colour depends on the target alone (not
// on the others in a chart), and the registered strategies get different
// ones while the palette lasts.
func TestColourFor_onePerStrategy(t *testing.T) {
	seen := map[color.RGBA]string{}
	for i, tg := range Targets() {
		c := colourFor(tg.Name, false)
		if other, ok := seen[c]; ok && i < len(palette) {
			t.Errorf("%s and %s share a colour", tg.Name, other)
		}
		seen[c] = tg.Name
	}
	if len(Targets()) == 0 {
		t.Error("no strategies registered in this test binary")
	}
}

func TestWriteChart_refusesBadInput(t *testing.T) {
	if err := WriteChart(&bytes.Buffer{}, sampleResults(), "gif"); err == nil {
		t.Error("gif accepted")
	}
	if err := WriteChart(&bytes.Buffer{}, nil, SVG); err == nil {
		t.Error("empty results accepted")
	}
}

// TestReports_targetStats: a target's own figures (a tiered target's lag
// and backlog) reach the table, the JSON and the CSV, and only the results
// that have them carry them.
func TestReports_targetStats(t *testing.T) {
	rs := sampleResults()[:2]
	rs[1].Stats = map[string]float64{"lag_p99_ms": 2800, "backlog_max": 10291, "lag_p50_ms": 0.25}
	var table, js, cs bytes.Buffer
	if err := WriteTable(&table, rs); err != nil {
		t.Fatal(err)
	}
	if out := table.String(); !strings.Contains(out, "slow at 1 workers: backlog_max 10,291, lag_p50_ms 0.25, lag_p99_ms 2,800") || strings.Contains(out, "fast at 1 workers:") {
		t.Errorf("table:\n%s", out)
	}
	if err := WriteJSON(&js, Meta{}, rs); err != nil {
		t.Fatal(err)
	}
	var doc Report
	if err := json.Unmarshal(js.Bytes(), &doc); err != nil {
		t.Fatal(err)
	}
	if doc.Results[0].Stats != nil || doc.Results[1].Stats["lag_p99_ms"] != 2800 || !strings.Contains(js.String(), `"backlog_max": 10291`) {
		t.Errorf("JSON rows' stats: %v, %v", doc.Results[0].Stats, doc.Results[1].Stats)
	}
	if err := WriteCSV(&cs, rs); err != nil {
		t.Fatal(err)
	}
	recs, err := csv.NewReader(&cs).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	last := len(csvHeader)
	if len(recs) != 3 || recs[0][last] != "stats" || recs[1][last] != "" || recs[2][last] != "backlog_max=10291;lag_p50_ms=0.25;lag_p99_ms=2800" {
		t.Errorf("csv %q", recs)
	}
}
