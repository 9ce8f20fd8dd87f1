package redislock

import (
	"bytes"
	"context"
	"encoding/csv"
	"fmt"
	"net"
	"os/exec"
	"strconv"
	"testing"
	"time"

	"github.com/stockguard/stockguard"
	"github.com/stockguard/stockguard/internal/backends/backendstest"
	"github.com/stockguard/stockguard/internal/rediskeys"
	"github.com/stockguard/stockguard/internal/redistest"
)

// BenchmarkAtomic decrements one hot SKU from 1, 16 and 64 goroutines.
func BenchmarkAtomic(b *testing.B) {
	rdb := backendstest.RedisClient(b)
	a, err := NewAtomic(rdb, WithPrefix("bench:"))
	if err != nil {
		b.Fatal(err)
	}
	for _, workers := range []int{1, 16, 64} {
		b.Run(fmt.Sprintf("workers=%d", workers), func(b *testing.B) {
			sku := redistest.HotSKU(b, a)
			b.Cleanup(func() { rdb.Del(context.Background(), rediskeys.Keys{Prefix: "bench:"}.Stock(sku)) })
			b.ResetTimer()
			cpu := backendstest.StartRedisCPU(b, rdb)
			d := redistest.DecrementN(b, a, sku, workers, b.N)
			cpu.Report(b)
			b.ReportMetric(float64(b.N)/d.Seconds(), "decrements/s")
		})
	}
}

// BenchmarkAtomicVsRedisBenchmark measures NewAtomic at 64 goroutines against
// redis-benchmark with 64 clients sending EVALSHA of the same script on the
// same kind of key to the same server — the bound a Go client can hope to
// approach. They take turns, in rounds, so that the noise of a shared
// machine hits both alike; the timer covers only NewAtomic. The
// redis-benchmark command it runs is
//
//	redis-benchmark -h HOST -p PORT -c 64 -n N --csv EVALSHA <sha1 of the decrement script> 2 <stock key> <holds key> 1 0
//
// and the metrics are NewAtomic's decrements/s, redis-benchmark's ops/s and
// their ratio.
func BenchmarkAtomicVsRedisBenchmark(b *testing.B) {
	bin, err := exec.LookPath("redis-benchmark")
	if err != nil {
		b.Skip("redis-benchmark not on PATH")
	}
	srv := backendstest.SharedRedis(b)
	host, port, err := net.SplitHostPort(srv.Addr)
	if err != nil {
		b.Fatal(err)
	}
	rdb := backendstest.RedisClient(b)
	const workers, rounds = 64, 4
	b.Run(fmt.Sprintf("workers=%d", workers), func(b *testing.B) {
		keys := rediskeys.Keys{Prefix: "bench:"}
		a, err := NewAtomic(rdb, WithPrefix(keys.Prefix))
		if err != nil {
			b.Fatal(err)
		}
		goSKU, rbSKU := redistest.HotSKU(b, a), redistest.HotSKU(b, a)
		b.Cleanup(func() { rdb.Del(context.Background(), keys.Stock(goSKU), keys.Stock(rbSKU)) })
		holds := a.holdsKey(rbSKU)
		if err := a.Decrement(b.Context(), goSKU, 1); err != nil { // loads the script
			b.Fatal(err)
		}
		per := max(b.N/rounds, 1)
		var goTime, rbTime time.Duration
		var rbOps int
		b.ResetTimer()
		for range rounds {
			b.StopTimer()
			rbTime += redisBenchmark(b, bin, host, port, workers, per, keys.Stock(rbSKU), holds)
			rbOps += per
			b.StartTimer()
			goTime += redistest.DecrementN(b, a, goSKU, workers, per)
		}
		b.StopTimer()
		// The script must really have run under redis-benchmark.
		if left, err := a.Stock(b.Context(), rbSKU); err != nil || left != stockguard.MaxQty-int64(rbOps) {
			b.Fatalf("redis-benchmark's key holds %d, %v; want %d", left, err, stockguard.MaxQty-int64(rbOps))
		}
		goRate := float64(rounds*per) / goTime.Seconds()
		rbRate := float64(rbOps) / rbTime.Seconds()
		b.ReportMetric(goRate, "decrements/s")
		b.ReportMetric(rbRate, "redis-benchmark-ops/s")
		b.ReportMetric(goRate/rbRate, "ratio")
	})
}

// redisBenchmark runs n EVALSHA calls of Decrement's script on the stock
// key and holds key from clients connections and returns the time they
// took, derived from the requests per second redis-benchmark reports
// (which excludes its start-up).
func redisBenchmark(b *testing.B, bin, host, port string, clients, n int, key, holds string) time.Duration {
	cmd := exec.Command(bin, "-h", host, "-p", port, "-c", strconv.Itoa(clients), "-n", strconv.Itoa(n), "--csv",
		"EVALSHA", decrementScript.Hash(), "2", key, holds, "1", "0")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		b.Fatalf("%v: %v\n%s", cmd, err, stderr.String())
	}
	records, err := csv.NewReader(bytes.NewReader(out)).ReadAll()
	if err != nil || len(records) != 2 || len(records[1]) < 2 {
		b.Fatalf("%v: unexpected output %q (%v)", cmd, out, err)
	}
	rps, err := strconv.ParseFloat(records[1][1], 64)
	if err != nil || rps <= 0 {
		b.Fatalf("%v: bad rps %q", cmd, records[1][1])
	}
	return time.Duration(float64(n) / rps * float64(time.Second))
}
