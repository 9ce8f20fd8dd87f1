package redislock

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stockguard/stockguard/internal/backends/backendstest"
)

func TestWatchdog_keepsAlivePastTTLAndStopsAtRelease(t *testing.T) {
	rdb := backendstest.SharedRedis(t).Client()
	t.Cleanup(func() { rdb.Close() })
	hook := &scriptHook{script: lockRefreshScript}
	rdb.AddHook(hook)
	c, err := New(rdb, WithPrefix(lockPrefix(t)))
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()

	const ttl = 300 * time.Millisecond
	l, err := c.Obtain(ctx, "k", ttl, Watchdog())
	if err != nil {
		t.Fatal(err)
	}
	lost := l.Lost()
	deadline := time.Now().Add(5*ttl + ttl/2)
	for time.Now().Before(deadline) {
		time.Sleep(ttl / 4)
		if left, err := l.TTL(ctx); err != nil || left <= 0 {
			t.Fatalf("after %v: TTL = %v, %v; the watchdog let the lock go", time.Since(deadline.Add(-5*ttl-ttl/2)), left, err)
		}
	}
	select {
	case <-lost:
		t.Fatal("Lost closed while the watchdog held the lock")
	default:
	}
	if n := hook.runs.Load(); n < 10 {
		t.Fatalf("%d renewals in 5.5 TTLs, want about 16 (every ttl/3)", n)
	}
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
	renewals := hook.runs.Load()
	if pttl := rdb.PTTL(ctx, c.keys.Lock("k")).Val(); pttl != -2 {
		t.Fatalf("PTTL after Release = %v, want -2 (no key)", pttl)
	}
	time.Sleep(ttl)
	if n := hook.runs.Load(); n != renewals {
		t.Fatalf("%d renewals sent after Release returned", n-renewals)
	}
	if rdb.Exists(ctx, c.keys.Lock("k")).Val() != 0 {
		t.Fatal("a late renewal brought the lock back")
	}
}

func TestWatchdog_signalsLossWhenKeyDeleted(t *testing.T) {
	c, rdb := newTestClient(t)
	ctx := t.Context()
	const ttl = 300 * time.Millisecond
	l, err := c.Obtain(ctx, "k", ttl, Watchdog())
	if err != nil {
		t.Fatal(err)
	}
	lctx := l.Context()
	if err := rdb.Del(ctx, c.keys.Lock("k")).Err(); err != nil {
		t.Fatal(err)
	}
	deleted := time.Now()
	select {
	case <-l.Lost():
	case <-time.After(10 * time.Second):
		t.Fatalf("the watchdog did not signal the loss %v after the deletion; renewals are every %v", time.Since(deleted), ttl/3)
	}
	if lctx.Err() == nil || !errors.Is(context.Cause(lctx), ErrNotHeld) {
		t.Fatalf("Context: err %v, cause %v; want cancelled with ErrNotHeld", lctx.Err(), context.Cause(lctx))
	}
	if err := l.Refresh(ctx, ttl); !errors.Is(err, ErrNotHeld) {
		t.Fatalf("Refresh = %v, want ErrNotHeld", err)
	}
	if rdb.Exists(ctx, c.keys.Lock("k")).Val() != 0 {
		t.Fatal("the watchdog re-created the deleted lock")
	}
	if err := l.Release(ctx); !errors.Is(err, ErrNotHeld) {
		t.Fatalf("Release = %v, want ErrNotHeld", err)
	}
}

func TestWatchdog_takenOverIsLost(t *testing.T) {
	c, rdb := newTestClient(t)
	ctx := t.Context()
	l, err := c.Obtain(ctx, "k", 300*time.Millisecond, Watchdog())
	if err != nil {
		t.Fatal(err)
	}
	// Someone else's lock in its place: the watchdog must not extend it.
	rdb.Set(ctx, c.keys.Lock("k"), "stranger", 10*time.Second)
	select {
	case <-l.Lost():
	case <-time.After(10 * time.Second):
		t.Fatal("the watchdog did not notice the takeover")
	}
	if got := rdb.Get(ctx, c.keys.Lock("k")).Val(); got != "stranger" {
		t.Fatalf("lock key holds %q after the watchdog gave up", got)
	}
	if pttl := rdb.PTTL(ctx, c.keys.Lock("k")).Val(); pttl < 9*time.Second {
		t.Fatalf("stranger's lease changed to %v", pttl)
	}
}

func TestWatchdog_maxHoldCapsTheHold(t *testing.T) {
	c, rdb := newTestClient(t)
	ctx := t.Context()
	const ttl, maxHold = 300 * time.Millisecond, 700 * time.Millisecond
	start := time.Now()
	l, err := c.Obtain(ctx, "k", ttl, MaxHold(maxHold))
	if err != nil {
		t.Fatal(err)
	}
	lost := l.Lost()
	time.Sleep(450 * time.Millisecond) // beyond the first lease: renewed
	if left, err := l.TTL(ctx); err != nil || left <= 0 {
		t.Fatalf("TTL at 450ms = %v, %v; want held", left, err)
	}
	select {
	case <-lost:
	case <-time.After(10 * time.Second):
		t.Fatal("Lost not closed after the hold cap")
	}
	gone := time.Since(start)
	for rdb.Exists(ctx, c.keys.Lock("k")).Val() != 0 {
		if time.Since(start) > maxHold+5*time.Second {
			t.Fatalf("lock still there %v after Obtain, cap %v", time.Since(start), maxHold)
		}
		time.Sleep(5 * time.Millisecond)
	}
	if gone < maxHold-50*time.Millisecond {
		t.Fatalf("lost after %v, before the cap of %v", gone, maxHold)
	}
	if err := l.Release(ctx); !errors.Is(err, ErrNotHeld) {
		t.Fatalf("Release after the cap = %v, want ErrNotHeld", err)
	}
}
