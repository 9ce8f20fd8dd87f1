package lock

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stockguard/stockguard"
	"github.com/stockguard/stockguard/internal/backends/backendstest"
	"github.com/stockguard/stockguard/internal/must"
	"github.com/stockguard/stockguard/internal/redistest"
	"github.com/stockguard/stockguard/strategy"
)

// lockPrefix returns a key prefix unique to t, so tests sharing a server
// never see each other's keys.
func lockPrefix(t testing.TB) string {
	return fmt.Sprintf("%s-%08x:", strings.ReplaceAll(t.Name(), "/", "."), rand.Uint32())
}

// newTestClient returns a lock client with its own prefix on the shared
// server, and a raw client to inspect and tamper with the keys.
func newTestClient(t testing.TB) (*Client, *redis.Client) {
	t.Helper()
	rdb := backendstest.RedisClient(t)
	return must.New(New(rdb, WithPrefix(lockPrefix(t)))), rdb
}

// scriptHook counts the runs of one script (EVALSHA or EVAL) on a client.
type scriptHook struct {
	script *redis.Script
	runs   atomic.Int64
}

func (h *scriptHook) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *scriptHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if a := cmd.Args(); len(a) > 1 && (a[1] == h.script.Hash() || a[0] == "eval" && a[1] == lockRefreshLua) {
			h.runs.Add(1)
		}
		return next(ctx, cmd)
	}
}

func (h *scriptHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

func TestClient_Obtain_releases(t *testing.T) {
	c, rdb := newTestClient(t)
	ctx := t.Context()
	l, err := c.Obtain(ctx, "k", time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if l.Key() != "k" || l.Token() < 1 {
		t.Fatalf("Key %q, Token %d", l.Key(), l.Token())
	}
	if ttl, err := l.TTL(ctx); err != nil || ttl <= 0 || ttl > time.Second {
		t.Fatalf("TTL = %v, %v; want (0, 1s]", ttl, err)
	}
	if got := rdb.Get(ctx, c.keys.Lock("k")).Val(); got != l.owner || len(got) != 32 {
		t.Fatalf("lock key holds %q, want the 128-bit owner token %q", got, l.owner)
	}
	_, err = c.Obtain(ctx, "k", time.Second)
	if !errors.Is(err, ErrNotObtained) || errors.Is(err, context.Canceled) {
		t.Fatalf("second Obtain = %v, want ErrNotObtained alone", err)
	}
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if n := rdb.Exists(ctx, c.keys.Lock("k")).Val(); n != 0 {
		t.Fatal("lock key left after Release")
	}
	if err := l.Release(ctx); !errors.Is(err, ErrNotHeld) {
		t.Fatalf("second Release = %v, want ErrNotHeld", err)
	}
	l2, err := c.Obtain(ctx, "k", time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if l2.Token() <= l.Token() {
		t.Fatalf("token %d after %d", l2.Token(), l.Token())
	}
	if err := l2.Release(ctx); err != nil {
		t.Fatal(err)
	}
}

func TestClient_Obtain_rejectsBadInputBeforeIO(t *testing.T) {
	c, rdb := newTestClient(t)
	ctx := t.Context()
	for _, tc := range []struct {
		name string
		ttl  time.Duration
		opts []ObtainOption
	}{
		{"zero ttl", 0, nil},
		{"sub-millisecond ttl", 999 * time.Microsecond, nil},
		{"negative ttl", -time.Second, nil},
		{"zero owner", time.Second, []ObtainOption{Reentrant(Owner{})}},
	} {
		if _, err := c.Obtain(ctx, "k", tc.ttl, tc.opts...); !errors.Is(err, stockguard.ErrInvalidRequest) {
			t.Errorf("%s: Obtain = %v, want ErrInvalidRequest", tc.name, err)
		}
	}
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	_, err := c.Obtain(cancelled, "k", time.Second)
	if !errors.Is(err, context.Canceled) || errors.Is(err, ErrNotObtained) {
		t.Fatalf("Obtain with a cancelled context = %v, want context.Canceled alone", err)
	}
	if n := rdb.Exists(ctx, c.keys.Lock("k"), c.keys.Fence("k")).Val(); n != 0 {
		t.Fatalf("%d keys written by rejected Obtains", n)
	}
}

func TestClient_Obtain_contextEndsWhileWaiting(t *testing.T) {
	c, _ := newTestClient(t)
	held, err := c.Obtain(t.Context(), "k", 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer held.Release(t.Context())
	for _, notify := range []bool{false, true} {
		opts := []ObtainOption{ObtainRetry(LinearBackoff(10 * time.Millisecond))}
		if notify {
			opts = append(opts, Notify())
		}
		ctx, cancel := context.WithTimeout(t.Context(), 100*time.Millisecond)
		_, err = c.Obtain(ctx, "k", time.Second, opts...)
		cancel()
		if !errors.Is(err, ErrNotObtained) || !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("notify=%v: Obtain = %v, want ErrNotObtained joined with DeadlineExceeded", notify, err)
		}
	}
}

func TestClient_Obtain_redisFailureIsNeitherNotObtainedNorContext(t *testing.T) {
	rdb := redis.NewClient(&redis.Options{Addr: closedAddr(t), MaxRetries: -1})
	defer rdb.Close()
	_, err := must.New(New(rdb)).Obtain(t.Context(), "k", time.Second)
	if err == nil || errors.Is(err, ErrNotObtained) || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Obtain against no server = %v, want a Redis error", err)
	}
}

// closedAddr returns a loopback address nobody listens on.
func closedAddr(t *testing.T) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return addr
}

func TestClient_Obtain_boundedRetriesGiveUp(t *testing.T) {
	c, _ := newTestClient(t)
	held, err := c.Obtain(t.Context(), "k", 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer held.Release(t.Context())
	start := time.Now()
	_, err = c.Obtain(t.Context(), "k", time.Second, ObtainRetry(LimitRetry(LinearBackoff(5*time.Millisecond), 3)))
	if !errors.Is(err, ErrNotObtained) || !strings.Contains(err.Error(), "4 attempts") {
		t.Fatalf("Obtain = %v, want ErrNotObtained after 4 attempts", err)
	}
	if d := time.Since(start); d < 15*time.Millisecond {
		t.Fatalf("gave up after %v, before its 3 backoffs of 5ms", d)
	}
}

// A stockguard.RetryPolicy, the type every WithRetry takes, bounds Obtain's
// tries too.
func TestClient_Obtain_retryPolicyBoundsTheTries(t *testing.T) {
	c, _ := newTestClient(t)
	held, err := c.Obtain(t.Context(), "k", 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer held.Release(t.Context())
	p := stockguard.RetryPolicy{MaxAttempts: 4, BaseDelay: time.Millisecond, MaxDelay: 2 * time.Millisecond}
	if _, err := c.Obtain(t.Context(), "k", time.Second, ObtainRetry(p)); !errors.Is(err, ErrNotObtained) || !strings.Contains(err.Error(), "4 attempts") {
		t.Fatalf("Obtain = %v, want ErrNotObtained after 4 attempts", err)
	}
}

func TestClient_Obtain_retriesUntilReleased(t *testing.T) {
	c, _ := newTestClient(t)
	held, err := c.Obtain(t.Context(), "k", 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	time.AfterFunc(50*time.Millisecond, func() { held.Release(context.Background()) })
	for name, s := range map[string]RetryStrategy{
		"linear":      LinearBackoff(5 * time.Millisecond),
		"exponential": ExponentialBackoff(time.Millisecond, 20*time.Millisecond),
	} {
		l, err := c.Obtain(t.Context(), "k", time.Second, ObtainRetry(LimitRetry(s, 1000)))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if l.Token() <= held.Token() {
			t.Fatalf("%s: token %d after %d", name, l.Token(), held.Token())
		}
		held = l
		time.AfterFunc(20*time.Millisecond, func() { l.Release(context.Background()) })
	}
}

func TestRetryStrategies(t *testing.T) {
	ms := time.Millisecond
	tests := []struct {
		name   string
		s      RetryStrategy
		retry  int
		lo, hi time.Duration // wanted wait range, inclusive
		ok     bool
	}{
		{"no retry", NoRetry(), 1, 0, 0, false},
		{"linear", LinearBackoff(7 * ms), 1, 7 * ms, 7 * ms, true},
		{"linear late", LinearBackoff(7 * ms), 1000, 7 * ms, 7 * ms, true},
		{"exponential first", ExponentialBackoff(2*ms, 64*ms), 1, 1, 2 * ms, true},
		{"exponential third", ExponentialBackoff(2*ms, 64*ms), 3, 1, 8 * ms, true},
		{"exponential capped", ExponentialBackoff(2*ms, 64*ms), 30, 1, 64 * ms, true},
		{"exponential huge retry", ExponentialBackoff(time.Hour, 2*time.Hour), 200, 1, 2 * time.Hour, true},
		{"limit within", LimitRetry(LinearBackoff(3*ms), 2), 2, 3 * ms, 3 * ms, true},
		{"limit beyond", LimitRetry(LinearBackoff(3*ms), 2), 3, 0, 0, false},
		{"limit zero", LimitRetry(LinearBackoff(3*ms), 0), 1, 0, 0, false},
	}
	for _, tc := range tests {
		for range 100 { // the jittered ones are random
			d, ok := tc.s.Backoff(tc.retry)
			if ok != tc.ok || ok && (d < tc.lo || d > tc.hi) {
				t.Fatalf("%s: Backoff(%d) = %v, %v; want %v in [%v, %v]", tc.name, tc.retry, d, ok, tc.ok, tc.lo, tc.hi)
			}
		}
	}
}

// TestLock_exclusion runs 16 goroutines through one lock: never two
// inside, and every holder's token is greater than the previous holder's.
func TestLock_exclusion(t *testing.T) {
	for _, mode := range []struct {
		name string
		opts []ObtainOption
	}{
		{"polling", []ObtainOption{ObtainRetry(ExponentialBackoff(time.Millisecond, 16*time.Millisecond))}},
		{"notified", []ObtainOption{Notify()}},
	} {
		t.Run(mode.name, func(t *testing.T) {
			c, _ := newTestClient(t)
			const goroutines, rounds = 16, 20
			var inside, entries, last atomic.Int64
			var wg sync.WaitGroup
			for range goroutines {
				wg.Go(func() {
					for range rounds {
						l, err := c.Obtain(t.Context(), "k", 5*time.Second, mode.opts...)
						if err != nil {
							t.Error(err)
							return
						}
						if n := inside.Add(1); n != 1 {
							t.Errorf("%d holders inside at once", n)
						}
						if prev := last.Swap(l.Token()); l.Token() <= prev {
							t.Errorf("token %d after %d", l.Token(), prev)
						}
						entries.Add(1)
						time.Sleep(100 * time.Microsecond)
						inside.Add(-1)
						if err := l.Release(t.Context()); err != nil {
							t.Error(err)
						}
					}
				})
			}
			wg.Wait()
			if n := entries.Load(); n != goroutines*rounds {
				t.Fatalf("%d entries, want %d", n, goroutines*rounds)
			}
		})
	}
}

// TestLock_ownerChecksAfterExpiry: A's lease runs out, B obtains; A can
// neither release nor refresh B's lock.
func TestLock_ownerChecksAfterExpiry(t *testing.T) {
	for _, reentrant := range []bool{false, true} {
		t.Run(fmt.Sprintf("reentrant=%v", reentrant), func(t *testing.T) {
			c, rdb := newTestClient(t)
			ctx := t.Context()
			var optsA, optsB []ObtainOption
			if reentrant {
				optsA, optsB = []ObtainOption{Reentrant(NewOwner())}, []ObtainOption{Reentrant(NewOwner())}
			}
			a, err := c.Obtain(ctx, "k", 100*time.Millisecond, optsA...)
			if err != nil {
				t.Fatal(err)
			}
			time.Sleep(150 * time.Millisecond)
			b, err := c.Obtain(ctx, "k", 10*time.Second, optsB...)
			if err != nil {
				t.Fatalf("B could not obtain the expired lock: %v", err)
			}
			if b.Token() <= a.Token() {
				t.Fatalf("B's token %d not above A's %d", b.Token(), a.Token())
			}
			if _, err := a.TTL(ctx); !errors.Is(err, ErrNotHeld) {
				t.Errorf("A.TTL = %v, want ErrNotHeld", err)
			}
			if err := a.Refresh(ctx, 10*time.Second); !errors.Is(err, ErrNotHeld) {
				t.Errorf("A.Refresh = %v, want ErrNotHeld", err)
			}
			if err := a.Release(ctx); !errors.Is(err, ErrNotHeld) {
				t.Errorf("A.Release = %v, want ErrNotHeld", err)
			}
			if reentrant {
				if n, err := rdb.HGet(ctx, c.keys.Lock("k"), b.owner).Int64(); err != nil || n != 1 {
					t.Fatalf("B's hold count = %d, %v; want 1", n, err)
				}
			} else if got := rdb.Get(ctx, c.keys.Lock("k")).Val(); got != b.owner {
				t.Fatalf("lock key holds %q, want B's token", got)
			}
			if ttl, err := b.TTL(ctx); err != nil || ttl < 9*time.Second {
				t.Fatalf("B.TTL = %v, %v; want B's lease untouched", ttl, err)
			}
			if err := b.Release(ctx); err != nil {
				t.Fatal(err)
			}
		})
	}
}

func TestLock_tokensStrictlyIncrease(t *testing.T) {
	c, _ := newTestClient(t)
	ctx := t.Context()
	owner := NewOwner()
	var last int64
	for i := range 30 {
		var opts []ObtainOption
		if i%3 == 0 {
			opts = append(opts, Reentrant(owner))
		}
		ttl := time.Second
		if i%5 == 0 {
			ttl = time.Millisecond // expires instead of being released
		}
		l, err := c.Obtain(ctx, "k", ttl, append(opts, ObtainRetry(LinearBackoff(time.Millisecond)))...)
		if err != nil {
			t.Fatal(err)
		}
		if l.Token() <= last {
			t.Fatalf("acquisition %d: token %d after %d", i, l.Token(), last)
		}
		last = l.Token()
		if ttl == time.Second {
			if err := l.Release(ctx); err != nil {
				t.Fatal(err)
			}
		}
	}
}

func TestLock_contextEndsAtRelease(t *testing.T) {
	c, _ := newTestClient(t)
	l, err := c.Obtain(t.Context(), "k", 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	lctx, lost := l.Context(), l.Lost()
	if err := l.Release(t.Context()); err != nil {
		t.Fatal(err)
	}
	if !errors.Is(context.Cause(lctx), ErrReleased) {
		t.Fatalf("cause %v, want ErrReleased", context.Cause(lctx))
	}
	select {
	case <-lost:
		t.Fatal("Lost closed by Release")
	default:
	}
	if err := l.Refresh(t.Context(), time.Second); !errors.Is(err, ErrNotHeld) {
		t.Fatalf("Refresh after Release = %v, want ErrNotHeld", err)
	}
}

func TestLock_contextEndsWhenLeaseRunsOut(t *testing.T) {
	c, _ := newTestClient(t)
	start := time.Now()
	l, err := c.Obtain(t.Context(), "k", 100*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-l.Lost():
	case <-time.After(30 * time.Second):
		t.Fatal("Lost not closed after the lease ran out")
	}
	if d := time.Since(start); d < 100*time.Millisecond {
		t.Fatalf("Lost closed after %v, before the 100ms lease ran out", d)
	}
	if !errors.Is(context.Cause(l.Context()), ErrNotHeld) {
		t.Fatalf("cause %v, want ErrNotHeld", context.Cause(l.Context()))
	}
	if err := l.Refresh(t.Context(), time.Second); !errors.Is(err, ErrNotHeld) {
		t.Fatalf("Refresh after the lease ran out = %v, want ErrNotHeld", err)
	}
}

// TestLock_refreshExtendsAndMovesTheDeadline: a lease refreshed before it
// runs out is held past its first end, in Redis and by the handle.
func TestLock_refreshExtendsAndMovesTheDeadline(t *testing.T) {
	c, _ := newTestClient(t)
	ctx := t.Context()
	const lease = 300 * time.Millisecond
	var l *Lock
	for {
		began := time.Now()
		var err error
		if l, err = c.Obtain(ctx, "k", lease); err != nil {
			t.Fatal(err)
		}
		err = l.Refresh(ctx, time.Minute)
		if err == nil {
			break
		}
		// A machine that stalled past the lease before the refresh landed
		// lost it rightly: try again. The test's own timeout is the hang
		// guard.
		if !errors.Is(err, ErrNotHeld) || time.Since(began) < lease {
			t.Fatalf("Refresh within the lease = %v", err)
		}
	}
	lost := l.Lost()
	time.Sleep(lease + 50*time.Millisecond) // past the first lease, by either clock
	select {
	case <-lost:
		t.Fatal("lost at the first lease's end although refreshed")
	default:
	}
	if err := l.Context().Err(); err != nil {
		t.Fatalf("Context ended at the first lease's end although refreshed: %v", context.Cause(l.Context()))
	}
	if d, err := l.TTL(ctx); err != nil || d <= lease {
		t.Fatalf("TTL past the first lease = %v, %v; want the refreshed minute's rest", d, err)
	}
	if err := l.Release(ctx); err != nil {
		t.Fatalf("Release past the first lease: %v", err)
	}
}

// BenchmarkObtainRelease measures one Obtain+Release cycle: alone, by 64
// goroutines on distinct keys, and by 64 goroutines on one key (waiting
// with Notify).
func BenchmarkObtainRelease(b *testing.B) {
	c, _ := newTestClient(b)
	ctx := context.Background()
	cycle := func(b *testing.B, key string, opts ...ObtainOption) {
		l, err := c.Obtain(ctx, key, 10*time.Second, opts...)
		if err != nil {
			b.Error(err)
			return
		}
		if err := l.Release(ctx); err != nil {
			b.Error(err)
		}
	}
	b.Run("uncontended", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			cycle(b, "solo")
		}
	})
	parallel64 := func(b *testing.B) {
		b.ReportAllocs()
		procs := runtime.GOMAXPROCS(0)
		b.SetParallelism((64 + procs - 1) / procs)
	}
	b.Run("keys=64/goroutines=64", func(b *testing.B) {
		parallel64(b)
		var id atomic.Int64
		b.RunParallel(func(pb *testing.PB) {
			key := "k" + strconv.FormatInt(id.Add(1), 10)
			for pb.Next() {
				cycle(b, key)
			}
		})
	})
	b.Run("keys=1/goroutines=64", func(b *testing.B) {
		parallel64(b)
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				cycle(b, "hot", Notify())
			}
		})
	})
}

// go-redis resends a command whose reply was lost; the obtain script must
// then recognise its own lock and return its token, not refuse.
func TestLockObtainScript_resendIsIdempotent(t *testing.T) {
	c, _ := newTestClient(t)
	ctx := t.Context()
	k, owner := c.keysFor("k", true), newToken()
	ok, first, _, err := c.attempt(ctx, k, owner, time.Second, false)
	if err != nil || !ok || first < 1 {
		t.Fatalf("first attempt: %v, token %d, %v", ok, first, err)
	}
	ok, again, _, err := c.attempt(ctx, k, owner, time.Second, false)
	if err != nil || !ok || again != first {
		t.Fatalf("resent attempt: %v, token %d, %v; want %d", ok, again, err, first)
	}
	ok, other, holder, err := c.attempt(ctx, k, newToken(), time.Second, false)
	if err != nil || ok || other != 0 || holder <= 0 || holder > time.Second {
		t.Fatalf("another owner's attempt: %v, token %d, holder's lease %v, %v", ok, other, holder, err)
	}
}

// TestClient_Obtain_NoFence: no token, no counter, nothing left after
// Release; the lock key holds OwnerToken meanwhile.
func TestClient_Obtain_NoFence(t *testing.T) {
	rdb := backendstest.RedisClient(t)
	prefix := redistest.Prefix(t, rdb)
	c, err := New(rdb, WithPrefix(prefix))
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	l, err := c.Obtain(ctx, "k", time.Second, NoFence())
	if err != nil {
		t.Fatal(err)
	}
	if l.Token() != 0 || !l.Valid() {
		t.Fatalf("Token %d, Valid %v; want 0, true", l.Token(), l.Valid())
	}
	if got := rdb.Get(ctx, c.LockKey("k")).Val(); got != l.OwnerToken() {
		t.Fatalf("lock key holds %q, want OwnerToken %q", got, l.OwnerToken())
	}
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if l.Valid() {
		t.Fatal("Valid after Release")
	}
	if keys := redistest.Keys(ctx, t, rdb, prefix); len(keys) != 0 {
		t.Fatalf("keys left after an unfenced lock's Release: %q", keys)
	}
}

// TestClient_Obtain_IfExists: a missing key is ErrNotExist with nothing
// created; an existing one gives a fenced lock as usual.
func TestClient_Obtain_IfExists(t *testing.T) {
	rdb := backendstest.RedisClient(t)
	prefix := redistest.Prefix(t, rdb)
	c := must.New(New(rdb, WithPrefix(prefix)))
	ctx := t.Context()
	resource := prefix + "res:{k}"
	_, err := c.Obtain(ctx, "k", time.Second, IfExists(resource))
	if !errors.Is(err, ErrNotExist) || strategy.IsContract(err) {
		t.Fatalf("Obtain IfExists a missing key: %v, want ErrNotExist", err)
	}
	if keys := redistest.Keys(ctx, t, rdb, prefix); len(keys) != 0 {
		t.Fatalf("keys created by an Obtain IfExists a missing key: %q", keys)
	}
	rdb.Set(ctx, resource, "x", 0)
	l, err := c.Obtain(ctx, "k", time.Second, IfExists(resource))
	if err != nil || l.Token() != 1 {
		t.Fatalf("Obtain IfExists an existing key: %v, %v; want token 1", l, err)
	}
	if got := rdb.Get(ctx, c.FenceKey("k")).Val(); got != "1" {
		t.Fatalf("fencing counter %q, want 1", got)
	}
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
}
