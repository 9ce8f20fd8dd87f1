package lock

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stockguard/stockguard/internal/backends/backendstest"
)

// watchdogAttempts is how many fresh locks a watchdog test tries before it
// fails. An attempt whose lock a stall lost — a renewal held back past
// the lease it had to extend, which a loaded machine under -race can do —
// shows nothing about the watchdog and is made again; a watchdog that does
// not do its job fails every attempt.
const watchdogAttempts = 3

// pollHeld asks Redis for l's TTL every interval until l is lost, or,
// with untilLost false, until a query sent at or after heldAfter finds the
// lock held. It returns when Lost was seen closed (zero if it was not) and
// whether such a late query found the lock held. A lock found gone in
// Redis must be signalled: the handle measures each lease from before the
// command that set it, so its own lease has run out by then too, and Lost
// closes — a lock lost silently fails t.
func pollHeld(t *testing.T, l *Lock, interval time.Duration, heldAfter time.Time, untilLost bool) (lostAt time.Time, heldLate bool) {
	t.Helper()
	lost := l.Lost()
	guard := time.After(30 * time.Second) // a hang guard only
	for {
		select {
		case <-lost:
			return time.Now(), heldLate
		case <-guard:
			t.Fatalf("lock neither lost nor checked held %v after %v", time.Since(heldAfter), heldAfter)
		case <-time.After(interval):
		}
		asked := time.Now()
		left, err := l.TTL(t.Context())
		switch {
		case err == nil && left > 0:
			heldLate = heldLate || !asked.Before(heldAfter)
			if heldLate && !untilLost {
				return time.Time{}, true
			}
		case err == nil || errors.Is(err, ErrNotHeld):
			select {
			case <-lost:
				return time.Now(), heldLate
			case <-time.After(10 * time.Second): // a hang guard: the timer is due already
				t.Fatalf("TTL = %v, %v, and Lost still open: the lock was lost silently", left, err)
			}
		default:
			t.Fatal(err)
		}
	}
}

// TestWatchdog_keepsAlivePastTTLAndStopsAtRelease: the watchdog keeps the
// lock held several TTLs after Obtain, and sends nothing after Release.
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

	const ttl, hold = 600 * time.Millisecond, 3*600*time.Millisecond + 300*time.Millisecond
	for attempt := range watchdogAttempts {
		key := fmt.Sprintf("k%d", attempt)
		before := hook.runs.Load()
		l, err := c.Obtain(ctx, key, ttl, Watchdog())
		if err != nil {
			t.Fatal(err)
		}
		// Without renewals the lock, set before Obtain returned, is gone
		// from Redis within ttl of obtained.
		obtained := time.Now()
		lostAt, heldLate := pollHeld(t, l, ttl/4, obtained.Add(hold), false)
		if !lostAt.IsZero() || !heldLate { // lost: a stall, or no renewals
			t.Logf("attempt %d: lock lost (signalled) %v after Obtain; trying again", attempt, lostAt.Sub(obtained))
			l.Release(ctx)
			continue
		}
		// Held 3.5 TTLs after Obtain: each renewal extends the lease by
		// ttl from when Redis ran it, and must run before the lease it
		// extends is out, so at least three ran.
		if n := hook.runs.Load() - before; n < 3 {
			t.Fatalf("%d renewals sent, yet the lock was held %v (%.1f TTLs) after Obtain", n, hold, float64(hold)/float64(ttl))
		}
		if err := l.Release(ctx); err != nil {
			t.Fatal(err)
		}
		renewals := hook.runs.Load()
		if pttl := rdb.PTTL(ctx, c.keys.Lock(key)).Val(); pttl != -2 {
			t.Fatalf("PTTL after Release = %v, want -2 (no key)", pttl)
		}
		time.Sleep(ttl)
		if n := hook.runs.Load(); n != renewals {
			t.Fatalf("%d renewals sent after Release returned", n-renewals)
		}
		if rdb.Exists(ctx, c.keys.Lock(key)).Val() != 0 {
			t.Fatal("a late renewal brought the lock back")
		}
		return
	}
	t.Fatalf("the lock was lost in each of %d attempts: the watchdog did not keep it alive", watchdogAttempts)
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
	// Someone else's lock in its place: the watchdog must not extend it
	// (its renewal would cut the hour to 300ms).
	rdb.Set(ctx, c.keys.Lock("k"), "stranger", time.Hour)
	select {
	case <-l.Lost():
	case <-time.After(10 * time.Second):
		t.Fatal("the watchdog did not notice the takeover")
	}
	if got := rdb.Get(ctx, c.keys.Lock("k")).Val(); got != "stranger" {
		t.Fatalf("lock key holds %q after the watchdog gave up", got)
	}
	if pttl := rdb.PTTL(ctx, c.keys.Lock("k")).Val(); pttl < 30*time.Minute {
		t.Fatalf("stranger's lease changed to %v", pttl)
	}
}

// TestWatchdog_maxHoldCapsTheHold: the watchdog renews the lock past its
// first lease, then lets it go at the cap, not before.
func TestWatchdog_maxHoldCapsTheHold(t *testing.T) {
	c, rdb := newTestClient(t)
	ctx := t.Context()
	const ttl, maxHold = 600 * time.Millisecond, 1500 * time.Millisecond
	for attempt := range watchdogAttempts {
		key := fmt.Sprintf("k%d", attempt)
		began := time.Now()
		l, err := c.Obtain(ctx, key, ttl, MaxHold(maxHold))
		if err != nil {
			t.Fatal(err)
		}
		// Without renewals the lock, set before Obtain returned, is gone
		// from Redis within ttl of obtained: held later, it was renewed.
		obtained := time.Now()
		lostAt, renewed := pollHeld(t, l, ttl/6, obtained.Add(ttl), true)
		// The cap counts from before Obtain sent its command, after began.
		if gone := lostAt.Sub(began); gone < maxHold-50*time.Millisecond || !renewed {
			t.Logf("attempt %d: lock lost (signalled) %v after Obtain, seen renewed %v; trying again", attempt, gone, renewed)
			continue
		}
		for rdb.Exists(ctx, c.keys.Lock(key)).Val() != 0 {
			if time.Since(lostAt) > 30*time.Second { // a hang guard: Redis expires the key at the cap
				t.Fatalf("lock still in Redis %v after Lost closed at the cap", time.Since(lostAt))
			}
			time.Sleep(5 * time.Millisecond)
		}
		if err := l.Release(ctx); !errors.Is(err, ErrNotHeld) {
			t.Fatalf("Release after the cap = %v, want ErrNotHeld", err)
		}
		return
	}
	t.Fatalf("in each of %d attempts the lock was lost before the cap of %v or never seen renewed", watchdogAttempts, maxHold)
}
