package bench_test

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stockguard/stockguard/bench"
	"github.com/stockguard/stockguard/bench/tidbtargets"
	"github.com/stockguard/stockguard/internal/backends/backendstest"
)

// BenchmarkDecrement runs every registered strategy on real servers, b.N
// requests from N workers over two instances, on K SKUs (uniform), and
// reports what the harness measures. ns/op is the measured window per
// request (set-up, warm-up and audit excluded). A strategy the audit finds
// unsound fails the benchmark.
//
//	go test -run '^$' -bench 'Decrement/strategy=mysql-atomic/' ./bench/
func BenchmarkDecrement(b *testing.B) {
	// Every backend is opened (private servers started) here, before the
	// first sub-benchmark: inside it, seconds of start-up would count as
	// its first round, which then never grows past b.N = 1. A backend that
	// cannot be had skips only the sub-benchmarks that need it.
	for _, bk := range bench.Backends() {
		if bk.Name != tidbtargets.Name || backendstest.TiDBEnabled() {
			shared.open(bk.Name)
		}
	}
	for _, t := range bench.Targets() {
		for _, workers := range []int{1, 8, 64} {
			for _, skus := range []int{1, 1024} {
				b.Run(fmt.Sprintf("strategy=%s/workers=%d/skus=%d", t.Name, workers, skus), func(b *testing.B) {
					w := bench.DefaultWorkload()
					w.Workers, w.SKUs = workers, skus
					r := benchRun(b, t, testServers(b, t), w)
					if !r.Sound() {
						b.Errorf("unsound: %+v", r.Audit)
					}
				})
			}
		}
	}
}

// BenchmarkOrders is BenchmarkDecrement for whole orders: every
// registered strategy that implements stockguard.Orders runs the checkout
// workload (carts of 1…lines distinct SKUs over 1000 SKUs, zipf-skewed;
// holds, confirms, returns and restocks as bench.DefaultOrderMix says),
// b.N orders from N workers over two instances. ns/op is the measured
// window per order; orders/s counts the acknowledged ones. A strategy the
// audit finds unsound fails the benchmark; one without Orders is skipped.
//
//	go test -run '^$' -bench 'Orders/strategy=mysql-.*/workers=64/' ./bench/
func BenchmarkOrders(b *testing.B) {
	for _, bk := range bench.Backends() {
		if bk.Name != tidbtargets.Name || backendstest.TiDBEnabled() {
			shared.open(bk.Name)
		}
	}
	for _, t := range bench.Targets() {
		for _, workers := range []int{1, 64} {
			for _, lines := range []int{1, 3} {
				b.Run(fmt.Sprintf("strategy=%s/workers=%d/lines=%d", t.Name, workers, lines), func(b *testing.B) {
					w := bench.DefaultWorkload()
					w.Shape, w.SKUs, w.Skew = bench.Checkout, 1000, bench.Skew{Zipf: bench.DefaultZipf}
					w.Workers, w.Orders.Lines = workers, lines
					r := benchRun(b, t, testServers(b, t), w)
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
	for _, t := range []bench.Target{bench.NoopTarget(), bench.MemTarget()} {
		b.Run("target="+t.Name+"/workers=64", func(b *testing.B) {
			b.ReportAllocs()
			w := bench.DefaultWorkload()
			w.Workers = 64
			r := benchRun(b, t, nil, w)
			b.ReportMetric(r.AttemptRate, "requests/s")
		})
	}
}

// benchWarmup is the unmeasured warm-up of each round of a benchmark:
// enough to fill the connection pools and the server's caches.
const benchWarmup = 100 * time.Millisecond

// benchRun runs b.N measured requests of w after a short warm-up and
// reports the harness's figures. The benchmark's timer runs only during
// the measured window, so that set-up, warm-up and audit neither count nor
// skew the framework's choice of b.N.
func benchRun(b *testing.B, t bench.Target, s bench.Servers, w bench.Workload) *bench.Result {
	b.Helper()
	w.Ops, w.Duration, w.Warmup = int64(b.N), 0, benchWarmup
	b.StopTimer()
	r, err := bench.Run(b.Context(), t, s, w, bench.WithWindow(b.StartTimer, b.StopTimer), bench.WithServerCPU(serverInfo()))
	if errors.Is(err, bench.ErrSkipped) {
		b.Skip(err)
	}
	if err != nil {
		b.Fatal(err)
	}
	if r.Attempts > 0 {
		b.ReportMetric(float64(r.Elapsed.Nanoseconds())/float64(r.Attempts), "ns/op")
	}
	if w.Shape == bench.Checkout {
		b.ReportMetric(r.Throughput, "orders/s")
	} else {
		b.ReportMetric(r.Throughput, "decrements/s")
	}
	b.ReportMetric(float64(r.Latency.P99)/1e6, "p99-ms")
	b.ReportMetric(r.RetriesPerOp, "retries/op")
	b.ReportMetric(float64(r.Audit.Oversold), "oversold")
	// Per request, as stockbench's JSON names them; a server whose CPU
	// cannot be read (see bench.CPUNotReadable) leaves its metric out.
	if v, ok := r.ServerCPUPerOp(); ok {
		b.ReportMetric(v, "server_cpu_us_per_op")
	}
	if v, ok := r.ClientCPUPerOp(); ok {
		b.ReportMetric(v, "client_cpu_us_per_op")
	}
	return r
}
