package bench

import (
	"fmt"
	"testing"
)

// BenchmarkDecrement runs every registered strategy on real servers, b.N
// requests from N workers over two instances, on K SKUs (uniform), and
// reports what the harness measures. ns/op is the measured window per
// request (set-up and audit excluded). A strategy the audit finds unsound
// fails the benchmark.
//
//	go test -run '^$' -bench 'Decrement/strategy=mysql-atomic/' ./bench/
func BenchmarkDecrement(b *testing.B) {
	for _, t := range Targets() {
		for _, workers := range []int{1, 8, 64} {
			for _, skus := range []int{1, 1024} {
				b.Run(fmt.Sprintf("strategy=%s/workers=%d/skus=%d", t.Name, workers, skus), func(b *testing.B) {
					w := DefaultWorkload()
					w.Workers, w.SKUs = workers, skus
					r := benchRun(b, t, testBackends(b, t), w)
					if !r.Sound() {
						b.Errorf("unsound: %+v", r.Audit)
					}
				})
			}
		}
	}
}

// BenchmarkHarness measures the harness itself at 64 workers: against a
// target that does nothing (noop) it must reach 10M requests/s so that it
// never limits a strategy; against the in-memory reference (memstock: one
// mutex) for comparison.
func BenchmarkHarness(b *testing.B) {
	for _, t := range []Target{noopTarget(), memTarget()} {
		b.Run("target="+t.Name+"/workers=64", func(b *testing.B) {
			b.ReportAllocs()
			w := DefaultWorkload()
			w.Workers = 64
			r := benchRun(b, t, Backends{}, w)
			b.ReportMetric(r.AttemptRate, "requests/s")
		})
	}
}

// benchRun runs b.N measured requests of w (no warm-up: the benchmark's
// own ramp-up warms) and reports the harness's figures.
func benchRun(b *testing.B, t Target, bk Backends, w Workload) *Result {
	b.Helper()
	w.Ops, w.Duration, w.Warmup = int64(b.N), 0, 0
	r, err := Run(b.Context(), t, bk, w)
	if err != nil {
		b.Fatal(err)
	}
	if r.Attempts > 0 {
		b.ReportMetric(float64(r.Elapsed.Nanoseconds())/float64(r.Attempts), "ns/op")
	}
	b.ReportMetric(r.Throughput, "decrements/s")
	b.ReportMetric(ms(r.Latency.P99), "p99-ms")
	b.ReportMetric(r.RetriesPerOp, "retries/op")
	b.ReportMetric(float64(r.Audit.Oversold), "oversold")
	return r
}
