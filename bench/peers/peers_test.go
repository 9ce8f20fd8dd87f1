package peers

import (
	"bytes"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stockguard/stockguard/bench"
	"github.com/stockguard/stockguard/bench/redistargets"
)

// servers starts the private servers the tests need; -short runs, which
// promise to need none, skip.
func servers(t *testing.T, n int) *Servers {
	t.Helper()
	if testing.Short() {
		t.Skip("starts redis-server processes")
	}
	s, err := OpenServers(t.Context(), n)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Error(err)
		}
	})
	return s
}

// TestRounds_measuresEveryPeer runs every standard case briefly: each peer
// completes cycles, its commands are counted, and notified waiting costs
// fewer commands per acquisition than polling every millisecond.
func TestRounds_measuresEveryPeer(t *testing.T) {
	srv := servers(t, Masters)
	run := NewRun()
	cases, closePeers, err := Standard(srv, run)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { closePeers() })
	results, err := Rounds(t.Context(), cases, run, 1, 200*time.Millisecond, nil)
	if err != nil {
		t.Fatal(err)
	}
	per := map[string]float64{}
	for ci, c := range cases {
		if len(results[ci]) != len(c.Peers) {
			t.Fatalf("%s: %d measurements, want one per peer (%d)", c.Scenario.Name, len(results[ci]), len(c.Peers))
		}
		for _, m := range results[ci] {
			if m.Cycles == 0 || m.Commands == 0 {
				t.Errorf("%s / %s: %d cycles, %d commands; want some of each", c.Scenario.Name, m.Peer, m.Cycles, m.Commands)
			}
			// Two commands at least per acquisition: obtain, release.
			if m.Cycles > 0 && m.PerAcquisition() < 2 {
				t.Errorf("%s / %s: %.2f commands per acquisition, below an obtain and a release", c.Scenario.Name, m.Peer, m.PerAcquisition())
			}
			if c.Scenario.Shared {
				per[m.Peer] = m.PerAcquisition()
			}
		}
	}
	if per["stockguard"] >= per["bsm/redislock"] {
		t.Errorf("64 waiters: stockguard (Notify) ran %.1f commands per acquisition, bsm/redislock polling every 1ms %.1f; want fewer", per["stockguard"], per["bsm/redislock"])
	}
	for _, srvClient := range srv.Clients {
		if n := srvClient.DBSize(t.Context()).Val(); n != 0 {
			t.Errorf("%d keys left behind on a server", n)
		}
	}
	var out bytes.Buffer
	WriteMarkdown(&out, cases, results)
	for _, c := range cases {
		for _, p := range c.Peers {
			if !strings.Contains(out.String(), "| "+p.Name+" |") {
				t.Errorf("the table has no row for %s in %q", p.Name, c.Scenario.Name)
			}
		}
	}
}

// TestTargets_auditSound runs each peer's guarded decrement under the
// harness on one hot SKU: registered, and nothing oversold or lost.
func TestTargets_auditSound(t *testing.T) {
	srv := servers(t, 1)
	s := bench.Servers{redistargets.Name: srv.Clients[0]}
	w := bench.DefaultWorkload()
	w.Duration, w.Warmup = 300*time.Millisecond, 0
	for _, name := range []string{"peer-bsm-redislock", "peer-redsync", "peer-rueidislock"} {
		t.Run(name, func(t *testing.T) {
			tg, ok := bench.Lookup(name)
			if !ok {
				t.Fatalf("%s is not registered", name)
			}
			r, err := bench.Run(t.Context(), tg, s, w)
			if err != nil {
				t.Fatal(err)
			}
			if !r.Sound() {
				t.Fatalf("audit: %+v", r.Audit)
			}
			if r.Successes == 0 {
				t.Fatalf("no decrement succeeded: errors %v %q", r.Errors, r.OtherErrors)
			}
		})
	}
}

// BenchmarkGuarded runs redislock's guarded decrement (redis-guarded: its
// lock, a fenced write) and the peers' (a plain write under each peer's
// lock) under the harness, on one hot SKU and on 1024, one server for all.
// A target the audit finds unsound fails the benchmark.
//
//	go test -run '^$' -bench Guarded -benchtime 20000x
func BenchmarkGuarded(b *testing.B) {
	if testing.Short() {
		b.Skip("starts a redis-server process")
	}
	srv, err := OpenServers(b.Context(), 1)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { srv.Close() })
	s := bench.Servers{redistargets.Name: srv.Clients[0]}
	for _, name := range []string{"redis-guarded", "peer-bsm-redislock", "peer-redsync", "peer-rueidislock"} {
		tg, ok := bench.Lookup(name)
		if !ok {
			b.Fatalf("%s is not registered", name)
		}
		for _, skus := range []int{1, 1024} {
			b.Run(fmt.Sprintf("target=%s/workers=64/skus=%d", name, skus), func(b *testing.B) {
				w := bench.DefaultWorkload()
				w.Workers, w.SKUs = 64, skus
				w.Ops, w.Duration, w.Warmup = int64(b.N), 0, 100*time.Millisecond
				b.StopTimer()
				r, err := bench.Run(b.Context(), tg, s, w, bench.WithWindow(b.StartTimer, b.StopTimer))
				if err != nil {
					b.Fatal(err)
				}
				if !r.Sound() {
					b.Fatalf("unsound: %+v", r.Audit)
				}
				b.ReportMetric(r.Throughput, "decrements/s")
				b.ReportMetric(float64(r.Latency.P99)/1e6, "p99-ms")
				b.ReportMetric(r.RetriesPerOp, "retries/op")
			})
		}
	}
}
