package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/stockguard/stockguard/bench"
	"github.com/stockguard/stockguard/internal/backends/backendstest"
)

// tieredProcs runs tiered-mysql at -procs 2 on the test binary's private
// servers, with started told each consumer process, and returns its one
// result and the command's stderr; it fails the test unless the run
// exited 0.
func tieredProcs(t *testing.T, started func(name string, p *os.Process, c bench.Consumer), args ...string) (bench.Row, string) {
	t.Helper()
	backendstest.SkipShort(t)
	tg, ok := bench.Lookup("tiered-mysql")
	if !ok {
		t.Fatal("tiered-mysql is not registered")
	}
	args = append([]string{"-procs", "2", "-workers", "8", "-skus", "1", "-warmup", "50ms", "-format", "json", "-plot", "",
		"-mysql-dsn", backendstest.SharedMySQL(t).DSN, "-redis-addr", backendstest.SharedRedis(t).Addr}, args...)
	var out, errOut bytes.Buffer
	code := run(t.Context(), args, env{stdout: &out, stderr: &errOut, backends: bench.Backends(),
		strategies: []bench.Target{tg}, consumerStarted: started})
	if code != exitOK {
		t.Fatalf("exit %d\n%s\n%s", code, out.String(), errOut.String())
	}
	var doc bench.Report
	if err := json.Unmarshal(out.Bytes(), &doc); err != nil {
		t.Fatalf("%v:\n%s", err, out.String())
	}
	if len(doc.Results) != 1 {
		t.Fatalf("%d results, want 1:\n%s", len(doc.Results), out.String())
	}
	r := doc.Results[0]
	if !r.Sound || !r.RawChecked || r.Procs != 2 || r.Acked == 0 || r.Mismatches != 0 || r.UnknownUnits != 0 {
		t.Errorf("sound %v, raw checked %v, %d procs, acked %d, mismatches %d, unknown %d; problems %q",
			r.Sound, r.RawChecked, r.Procs, r.Acked, r.Mismatches, r.UnknownUnits, r.Problems)
	}
	return r, errOut.String()
}

// TestRun_procsTieredConsumers: at -procs 2 tiered-mysql's consumers run
// in two consumer processes of their own, both of which apply entries;
// the audit reads the back (after the drain) and the front and finds both
// at initial − acknowledged, and every acknowledged decrement was applied
// and acknowledged once on the stream (one entry per unit at qty 1, with
// no drain requests of more).
func TestRun_procsTieredConsumers(t *testing.T) {
	r, stderr := tieredProcs(t, nil, "-duration", "1s", "-drain", "0")
	s := r.Stats
	if s["consumer_procs"] != 2 || s["consumer_procs_lost"] != 0 {
		t.Fatalf("stats %v, want 2 consumer processes, none lost\n%s", s, stderr)
	}
	one, two := s["applied_by_consumer-1"], s["applied_by_consumer-2"]
	if one == 0 || two == 0 || one+two != s["back_applied"] {
		t.Errorf("applied by consumer-1 %v, consumer-2 %v, in all %v: want both, adding up", one, two, s["back_applied"])
	}
	if s["back_applied"] != float64(r.Acked) || s["claimed"] != 0 {
		t.Errorf("consumers applied %v entries (%v claimed), the workers had %d units acknowledged", s["back_applied"], s["claimed"], r.Acked)
	}
}

// TestRun_procsTieredConsumerKilled: consumer process 1 is SIGKILLed mid-run
// while it holds delivered, unacknowledged entries (caught stopped with
// SIGSTOP, so the count is exact); consumer process 2 claims them after
// -claim-idle, and the audit finds every acknowledged unit on the back
// once — nothing lost, nothing doubled.
func TestRun_procsTieredConsumerKilled(t *testing.T) {
	backendstest.SkipShort(t)
	rdb := backendstest.SharedRedis(t).Client()
	t.Cleanup(func() { rdb.Close() })
	var (
		wg       sync.WaitGroup
		stranded int64
		killErr  error
	)
	var mu sync.Mutex
	claimIdle := map[string]time.Duration{}
	started := func(name string, p *os.Process, c bench.Consumer) {
		mu.Lock()
		claimIdle[c.Name] = c.ClaimIdle
		mu.Unlock()
		if name != "consumer process 1 of 2" {
			return
		}
		wg.Go(func() { stranded, killErr = killHolding(t.Context(), rdb, p, "consumer-1") })
	}
	r, stderr := tieredProcs(t, started, "-duration", "2s", "-claim-idle", "300ms")
	// With tiered's default claim idle (30 s) the audit's drain would
	// wait that long for the dead consumer's entries.
	if want := (map[string]time.Duration{"consumer-1": 300 * time.Millisecond, "consumer-2": 300 * time.Millisecond}); !maps.Equal(claimIdle, want) {
		t.Errorf("consumer processes given claim idle %v, want -claim-idle's %v", claimIdle, want)
	}
	wg.Wait()
	if killErr != nil {
		t.Fatal(killErr)
	}
	t.Logf("consumer-1 killed holding %d entries; stats %v", stranded, r.Stats)
	s := r.Stats
	if s["consumer_procs"] != 2 || s["consumer_procs_lost"] != 1 || !strings.Contains(stderr, "consumer process 1 of 2 ended before reporting") {
		t.Errorf("stats %v, want 2 consumer processes, 1 lost, and a note of it:\n%s", s, stderr)
	}
	if s["claimed"] < float64(stranded) || s["applied_by_consumer-2"] == 0 {
		t.Errorf("consumer-2 claimed %v entries, applied %v; consumer-1 died holding %d", s["claimed"], s["applied_by_consumer-2"], stranded)
	}
}

// killHolding waits half a second, then until the consumer named name holds delivered,
// unacknowledged entries, checked with the process stopped (SIGSTOP) so
// that it cannot acknowledge them in between, then SIGKILLs it and returns
// how many it held.
func killHolding(ctx context.Context, rdb *redis.Client, p *os.Process, name string) (int64, error) {
	time.Sleep(500 * time.Millisecond) // into the measured run
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		keys, err := rdb.Keys(ctx, "sb*:tiered:effects").Result()
		if err != nil || len(keys) != 1 {
			time.Sleep(5 * time.Millisecond)
			continue
		}
		if err := p.Signal(syscall.SIGSTOP); err != nil {
			return 0, err
		}
		// An acknowledgement it wrote right before it stopped is still on
		// its way to Redis: counted before it lands, its entries would be
		// acknowledged after the count, and nobody would need to claim them.
		time.Sleep(100 * time.Millisecond)
		held := int64(0)
		if x, err := rdb.XPendingExt(ctx, &redis.XPendingExtArgs{Stream: keys[0], Group: "tiered", Start: "-", End: "+", Count: 100000, Consumer: name}).Result(); err == nil {
			held = int64(len(x))
		}
		if held > 0 {
			return held, p.Kill()
		}
		if err := p.Signal(syscall.SIGCONT); err != nil {
			return 0, err
		}
		time.Sleep(time.Millisecond)
	}
	return 0, fmt.Errorf("no moment when %s held entries", name)
}
