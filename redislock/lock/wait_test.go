package lock

import (
	"bufio"
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stockguard/stockguard/internal/backends/backendstest"
)

func TestNotify_wakesOnRelease(t *testing.T) {
	c, _ := newTestClient(t)
	ctx := t.Context()
	held, err := c.Obtain(ctx, "k", 30*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	// Taken before the release is scheduled: the release comes 100ms
	// after start at the earliest, however late this goroutine runs.
	start := time.Now()
	time.AfterFunc(100*time.Millisecond, func() { held.Release(context.Background()) })
	// The fallback poll comes after a minute; the context ends the wait
	// at 30s: only the release announcement can wake the waiter in time.
	wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	l, err := c.Obtain(wctx, "k", time.Second, Notify(), ObtainRetry(LinearBackoff(time.Minute)))
	if err != nil {
		t.Fatalf("waiter not woken by the release: %v", err)
	}
	if d := time.Since(start); d < 100*time.Millisecond {
		t.Fatalf("obtained after %v, before the holder released at 100ms", d)
	}
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
}

func TestNotify_wakesWhenHolderLeaseRunsOut(t *testing.T) {
	c, _ := newTestClient(t)
	ctx := t.Context()
	// A holder that dies: no release, no announcement.
	if _, err := c.Obtain(ctx, "k", 200*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	// The fallback poll comes after a minute; the context ends the wait
	// at 30s: only the waiter noticing the lease run out can get it in time.
	wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	l, err := c.Obtain(wctx, "k", time.Second, Notify(), ObtainRetry(LinearBackoff(time.Minute)))
	if err != nil {
		t.Fatalf("waiter not woken when the holder's lease ran out: %v", err)
	}
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestNotify_reentrantReleaseAnnouncesOnlyAtZero: waiters wake when the
// last hold goes, not at every nested release.
func TestNotify_reentrantReleaseAnnouncesOnlyAtZero(t *testing.T) {
	c, _ := newTestClient(t)
	ctx := t.Context()
	owner := NewOwner()
	outer, err := c.Obtain(ctx, "k", 30*time.Second, Reentrant(owner))
	if err != nil {
		t.Fatal(err)
	}
	inner, err := c.Obtain(ctx, "k", 30*time.Second, Reentrant(owner))
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan *Lock, 1)
	go func() {
		l, err := c.Obtain(ctx, "k", time.Second, Notify(), ObtainRetry(LinearBackoff(time.Minute)))
		if err != nil {
			t.Error(err)
		}
		got <- l
	}()
	time.Sleep(50 * time.Millisecond)
	if err := inner.Release(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case <-got:
		t.Fatal("waiter obtained the lock while the outer hold was open")
	case <-time.After(100 * time.Millisecond):
	}
	if err := outer.Release(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case l := <-got:
		if l != nil {
			l.Release(ctx)
		}
	case <-time.After(30 * time.Second): // a hang guard, within the minute's fallback poll
		t.Fatal("waiter not woken by the last release")
	}
}

// commandStats returns Redis's per-command call counts (INFO commandstats:
// top-level commands and those run inside scripts alike).
func commandStats(tb testing.TB, rdb *redis.Client) map[string]int64 {
	tb.Helper()
	info, err := rdb.Info(context.Background(), "commandstats").Result()
	if err != nil {
		tb.Fatal(err)
	}
	stats := make(map[string]int64)
	sc := bufio.NewScanner(strings.NewReader(info))
	for sc.Scan() {
		name, rest, ok := strings.Cut(strings.TrimPrefix(sc.Text(), "cmdstat_"), ":calls=")
		if !ok {
			continue
		}
		calls, _, _ := strings.Cut(rest, ",")
		n, err := strconv.ParseInt(calls, 10, 64)
		if err != nil {
			tb.Fatalf("commandstats line %q: %v", sc.Text(), err)
		}
		stats[name] = n
	}
	return stats
}

// acquireCost is what Redis executed per successful acquisition.
type acquireCost struct {
	cmds    float64 // every command, inside scripts too
	scripts float64 // EVALSHA/EVAL: obtain attempts and releases
	subs    float64 // SUBSCRIBE/UNSUBSCRIBE
}

// measure resets Redis's command statistics, runs run, and returns the cost
// per acquisition of the n acquisitions run reports having made.
func measure(tb testing.TB, rdb *redis.Client, run func() int64) acquireCost {
	tb.Helper()
	if err := rdb.ConfigResetStat(context.Background()).Err(); err != nil {
		tb.Fatal(err)
	}
	n := float64(run())
	var cost acquireCost
	for name, calls := range commandStats(tb, rdb) {
		switch name {
		case "info", "config|resetstat", "config":
			continue
		case "evalsha", "eval":
			cost.scripts += float64(calls)
		case "subscribe", "unsubscribe":
			cost.subs += float64(calls)
		}
		cost.cmds += float64(calls)
	}
	return acquireCost{cost.cmds / n, cost.scripts / n, cost.subs / n}
}

// contend has goroutines take turns on one lock until total acquisitions
// are made, each holding it for hold. It returns the acquisitions made.
func contend(tb testing.TB, c *Client, goroutines int, total int64, hold time.Duration, opts ...ObtainOption) int64 {
	var made atomic.Int64
	var wg sync.WaitGroup
	for range goroutines {
		wg.Go(func() {
			for made.Load() < total {
				l, err := c.Obtain(context.Background(), "hot", 10*time.Second, opts...)
				if err != nil {
					tb.Error(err)
					return
				}
				made.Add(1)
				if hold > 0 {
					time.Sleep(hold)
				}
				if err := l.Release(context.Background()); err != nil {
					tb.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	return made.Load()
}

// waitModes are the ways a contended Obtain can wait, compared below.
var waitModes = []struct {
	name string
	opts []ObtainOption
}{
	{"polling-linear-1ms", []ObtainOption{ObtainRetry(LinearBackoff(time.Millisecond))}},
	{"polling-exponential-1ms-64ms", []ObtainOption{ObtainRetry(ExponentialBackoff(time.Millisecond, 64*time.Millisecond))}},
	{"notified", []ObtainOption{Notify()}},
}

// TestNotify_fewerCommandsThanPolling measures the Redis commands per
// acquisition with 64 waiters on one lock (private server, so the counts
// are ours alone).
func TestNotify_fewerCommandsThanPolling(t *testing.T) {
	rdb := backendstest.PrivateRedis(t, 1)[0].Client()
	t.Cleanup(func() { rdb.Close() })
	c, err := New(rdb)
	if err != nil {
		t.Fatal(err)
	}
	costs := make(map[string]acquireCost)
	for _, m := range waitModes {
		start := time.Now()
		cost := measure(t, rdb, func() int64 { return contend(t, c, 64, 320, 200*time.Microsecond, m.opts...) })
		t.Logf("%-30s %6.1f cmds/acquire %6.1f scripts/acquire %5.2f subs/acquire (%v)", m.name, cost.cmds, cost.scripts, cost.subs, time.Since(start).Round(time.Millisecond))
		costs[m.name] = cost
	}
	polling, notified := costs["polling-linear-1ms"], costs["notified"]
	if notified.scripts*2 > polling.scripts {
		t.Fatalf("notified waiting runs %.1f scripts per acquisition, polling every 1ms %.1f: want at most half", notified.scripts, polling.scripts)
	}
	// One obtain and one release per acquisition at best; each
	// announcement wakes one waiter, so only acquisitions that lose a race
	// to a newcomer add attempts.
	if notified.scripts > 6 {
		t.Fatalf("notified waiting runs %.1f scripts per acquisition, want few", notified.scripts)
	}
}

// BenchmarkWait compares the ways of waiting for a contended lock: 64
// goroutines on one key, each op one acquisition and release, the lock held
// for nothing or for 200µs (about a guarded decrement's read and write).
// Metrics: Redis commands (inside scripts too), scripts and
// (un)subscriptions per acquisition, counted by a private server.
func BenchmarkWait(b *testing.B) {
	rdb := backendstest.PrivateRedis(b, 1)[0].Client()
	b.Cleanup(func() { rdb.Close() })
	c, err := New(rdb)
	if err != nil {
		b.Fatal(err)
	}
	for _, hold := range []time.Duration{0, 200 * time.Microsecond} {
		for _, m := range waitModes {
			b.Run(fmt.Sprintf("hold=%v/mode=%s/waiters=64", hold, m.name), func(b *testing.B) {
				b.ReportAllocs()
				cost := measure(b, rdb, func() int64 {
					b.ResetTimer()
					n := contend(b, c, 64, int64(b.N), hold, m.opts...)
					b.StopTimer()
					return n
				})
				b.ReportMetric(cost.cmds, "cmds/acquire")
				b.ReportMetric(cost.scripts, "scripts/acquire")
				b.ReportMetric(cost.subs, "subs/acquire")
			})
		}
	}
}
