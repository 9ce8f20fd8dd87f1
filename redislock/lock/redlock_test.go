package lock

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stockguard/stockguard"
	"github.com/stockguard/stockguard/internal/backends"
	"github.com/stockguard/stockguard/internal/backends/backendstest"
	"github.com/stockguard/stockguard/internal/must"
)

// testNodeTimeout is for tests that are not about the node timeout: a live
// master answers well within it however loaded the machine (-race, on
// first use a dial and a script load), so that it never reads as failed.
// A killed master refuses the connection and fails at once; only a paused
// one would wait it out. Leases in those tests are longer still, as the
// node timeout eats into them.
const testNodeTimeout = 10 * time.Second

// testLease is a lease that outlasts a test's checks on a loaded machine,
// and testNodeTimeout several times over.
const testLease = time.Minute

// masters starts n private Redis servers and returns them with a client
// on each. The clients do not retry: a call to a master a test killed
// fails at its refused dial, where retries would back off for a second
// or so, against a node timeout long enough to let them.
func masters(t *testing.T, n int) ([]*backends.Redis, []redis.UniversalClient) {
	t.Helper()
	servers := backendstest.PrivateRedis(t, n)
	clients := make([]redis.UniversalClient, n)
	for i, s := range servers {
		c := redis.NewClient(&redis.Options{Addr: s.Addr, PoolSize: 128, MaxRetries: -1})
		t.Cleanup(func() { c.Close() })
		clients[i] = c
	}
	return servers, clients
}

// lockedOn returns the masters that hold key's lock under the Redlock's
// key names. Every master must answer (pass only live ones): one that did
// not would read as not holding it.
func lockedOn(t *testing.T, r *Redlock, clients []redis.UniversalClient, key string) []int {
	t.Helper()
	var on []int
	for i, c := range clients {
		ctx, cancel := context.WithTimeout(t.Context(), time.Minute) // a hang guard only
		n, err := c.Exists(ctx, r.LockKey(key)).Result()
		cancel()
		if err != nil {
			t.Fatalf("master %d: %v", i, err)
		}
		if n == 1 {
			on = append(on, i)
		}
	}
	return on
}

func TestRedlock_Obtain_excludes(t *testing.T) {
	_, clients := masters(t, 5)
	// 16 goroutines over 5 masters on a loaded 2-core machine: a short
	// node timeout can leave an Obtain or a Release short of its quorum,
	// and a short lease can run out in a critical section, neither of
	// which is what this test is about.
	r, err := NewRedlock(clients, WithNodeTimeout(testNodeTimeout))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	var inside, most, grants atomic.Int64
	var wg sync.WaitGroup
	for range 16 {
		wg.Go(func() {
			for range 5 {
				l, err := r.Obtain(ctx, "k", testLease, ObtainRetry(ExponentialBackoff(time.Millisecond, 20*time.Millisecond)))
				if err != nil {
					t.Errorf("Obtain: %v", err)
					return
				}
				now := inside.Add(1)
				for m := most.Load(); now > m && !most.CompareAndSwap(m, now); m = most.Load() {
				}
				grants.Add(1)
				time.Sleep(time.Millisecond)
				inside.Add(-1)
				if !l.Valid() {
					t.Errorf("lock invalid at the end of a 1ms critical section (valid until %v)", l.ValidUntil())
				}
				if err := l.Release(ctx); err != nil {
					t.Errorf("Release: %v", err)
				}
			}
		})
	}
	wg.Wait()
	if most.Load() != 1 || grants.Load() != 80 {
		t.Fatalf("%d grants, at most %d holders at once; want 80 and 1", grants.Load(), most.Load())
	}
}

func TestRedlock_Obtain_grantsWithTwoMastersKilled(t *testing.T) {
	servers, clients := masters(t, 5)
	for _, s := range servers[:2] {
		if err := s.Proc.Kill(); err != nil {
			t.Fatal(err)
		}
	}
	r, err := NewRedlock(clients, WithNodeTimeout(testNodeTimeout))
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	const ttl = testLease
	l, err := r.Obtain(ctx, "k", ttl)
	if err != nil {
		t.Fatalf("Obtain with 3 of 5 masters up: %v", err)
	}
	if !l.Valid() || time.Until(l.ValidUntil()) > ttl {
		t.Fatalf("Valid() = %v, valid until %v", l.Valid(), l.ValidUntil())
	}
	if on := lockedOn(t, r, clients[2:], "k"); len(on) != 3 {
		t.Fatalf("lock set on live masters %v of 2…4, want all 3", on)
	}
	if _, err := r.Obtain(ctx, "k", ttl); !errors.Is(err, ErrNotObtained) {
		t.Fatalf("second Obtain = %v, want ErrNotObtained", err)
	}
	if err := l.Refresh(ctx, ttl); err != nil {
		t.Fatalf("Refresh with 3 of 5 masters up: %v", err)
	}
	if err := l.Release(ctx); err != nil {
		t.Fatalf("Release with 3 of 5 masters up: %v", err)
	}
	if on := lockedOn(t, r, clients[2:], "k"); len(on) != 0 {
		t.Fatalf("lock still set on masters %v after Release", on)
	}
}

func TestRedlock_Obtain_refusesWithThreeMastersKilled(t *testing.T) {
	servers, clients := masters(t, 5)
	for _, s := range servers[:3] {
		if err := s.Proc.Kill(); err != nil {
			t.Fatal(err)
		}
	}
	r := must.New(NewRedlock(clients, WithNodeTimeout(testNodeTimeout)))
	ctx := t.Context()
	// The lock is set on the two live masters, then taken back.
	hooks := make([]*scriptHook, 2)
	for i, c := range clients[3:] {
		hooks[i] = &scriptHook{script: lockObtainScript}
		c.AddHook(hooks[i])
	}
	_, err := r.Obtain(ctx, "k", testLease)
	if !errors.Is(err, ErrNotObtained) {
		t.Fatalf("Obtain with 2 of 5 masters up = %v, want ErrNotObtained", err)
	}
	// The killed masters' refused dials can make the refusal certain
	// before the live masters answer: the round ends, their calls finish
	// in the background, and a lock they set is deleted once they answer.
	deadline := time.Now().Add(time.Minute) // a hang guard only
	for i, c := range clients[3:] {
		for hooks[i].runs.Load() == 0 || c.DBSize(ctx).Val() != 0 {
			if time.Now().After(deadline) {
				t.Fatalf("live master %d: asked %d times for the lock, holds %q after the refusal; want asked, and none",
					3+i, hooks[i].runs.Load(), c.Keys(ctx, "*").Val())
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
}

// A lock held elsewhere on the live masters while one master is down
// cannot be told from a lock that the dead master's vote would have
// granted: split votes among the survivors are what a lost master causes.
// The refusal says the service was degraded (ErrUnavailable), so that a
// caller does not read a dead master as "busy, try again".
func TestRedlock_Obtain_refusedWithAMasterDownIsUnavailable(t *testing.T) {
	servers, clients := masters(t, 3)
	// A live master that missed the node timeout would read as failed.
	r, err := NewRedlock(clients, WithNodeTimeout(testNodeTimeout))
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	held, err := r.Obtain(ctx, "k", testLease)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.Obtain(ctx, "k", testLease); !errors.Is(err, ErrNotObtained) || errors.Is(err, stockguard.ErrUnavailable) {
		t.Fatalf("Obtain of a held lock, every master up = %v, want ErrNotObtained alone", err)
	}
	if err := servers[0].Proc.Kill(); err != nil {
		t.Fatal(err)
	}
	_, err = r.Obtain(ctx, "k", testLease)
	if !errors.Is(err, ErrNotObtained) || !errors.Is(err, stockguard.ErrUnavailable) {
		t.Fatalf("Obtain of a held lock with a master down = %v, want ErrNotObtained and ErrUnavailable", err)
	}
	_ = held.Release(ctx)
}

func TestRedlock_expiredLockIsReportedAsSuch(t *testing.T) {
	_, clients := masters(t, 3)
	// A node timeout a live master answers well within, however loaded
	// the machine (on first use it dials and loads the script), and a
	// lease that outlasts it.
	r, err := NewRedlock(clients, WithNodeTimeout(1500*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	l, err := r.Obtain(ctx, "k", 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	// ttl − drift: 2s − (20ms + 2ms), from before the lock was sent.
	if d := time.Until(l.ValidUntil()); d > 1978*time.Millisecond || d <= 0 {
		t.Fatalf("validity left right after Obtain: %v, want (0, 1978ms]", d)
	}
	time.Sleep(time.Until(l.ValidUntil()) + time.Millisecond)
	if l.Valid() {
		t.Fatal("Valid() after the validity ran out")
	}
	if err := l.Refresh(ctx, time.Second); !errors.Is(err, ErrExpired) || !errors.Is(err, ErrNotHeld) {
		t.Fatalf("Refresh after the validity ran out = %v, want ErrExpired (and ErrNotHeld)", err)
	}
	if err := l.Release(ctx); !errors.Is(err, ErrExpired) {
		t.Fatalf("Release after the validity ran out = %v, want ErrExpired", err)
	}
	if on := lockedOn(t, r, clients, "k"); len(on) != 0 {
		t.Fatalf("lock still set on masters %v after Release", on)
	}
	if err := l.Release(ctx); !errors.Is(err, ErrNotHeld) || errors.Is(err, ErrExpired) {
		t.Fatalf("second Release = %v, want ErrNotHeld", err)
	}
}

// TestRedlock_pausedMasterCostsAtMostTheNodeTimeout stops two of five
// masters (SIGSTOP): their replies never come, and a round waits for them
// only as long as the node timeout — and only when it needs them.
func TestRedlock_pausedMasterCostsAtMostTheNodeTimeout(t *testing.T) {
	servers, _ := masters(t, 5)
	// Clients whose own read timeout outlasts the test: a call to a paused
	// master ends only when the master is continued, so a round that
	// returned had stopped waiting for it by its own decision.
	clients := make([]redis.UniversalClient, len(servers))
	for i, s := range servers {
		c := redis.NewClient(&redis.Options{Addr: s.Addr, ReadTimeout: 10 * time.Minute, WriteTimeout: 10 * time.Minute})
		t.Cleanup(func() { c.Close() })
		clients[i] = c
	}
	const timeout = 2 * time.Second
	r, err := NewRedlock(clients, WithNodeTimeout(timeout))
	if err != nil {
		t.Fatal(err)
	}
	// A round that waited for the paused masters would wait out a node
	// timeout of an hour; the guard's context ends any wait long before.
	patient, err := NewRedlock(clients, WithNodeTimeout(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	for _, s := range servers[:2] {
		if err := s.Proc.Pause(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Proc.Resume() })
	}

	guard, cancel := context.WithTimeout(ctx, time.Minute) // a hang guard only
	defer cancel()
	l, err := patient.Obtain(guard, "k", time.Hour)
	if err != nil {
		t.Fatalf("Obtain with 2 of 5 masters paused: %v", err)
	}
	if guard.Err() != nil || l.obtains[0].answered() || l.obtains[1].answered() {
		t.Errorf("Obtain returned with the guard's context ended (%v) or a paused master answered: it waited for them although 3 live masters had answered", guard.Err())
	}
	// Release waits for the paused masters' answers up to the node
	// timeout, or, as here, until its context ends (they are released
	// once they answer): end it once the live masters are released.
	rctx, rcancel := context.WithCancel(ctx)
	released := make(chan struct{})
	go func() { l.Release(rctx); close(released) }()
	for deadline := time.Now().Add(30 * time.Second); len(lockedOn(t, r, clients[2:], "k")) != 0; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) { // a hang guard only
			t.Fatalf("lock still set on live masters %v after Release", lockedOn(t, r, clients[2:], "k"))
		}
	}
	rcancel()
	<-released

	// Another owner holds the lock on one live master: the round needs a
	// paused one, and gives up at the node timeout, not at the lease's end
	// nor the guard's.
	other := r.LockKey("k")
	if err := clients[2].Set(ctx, other, "someone-else", time.Hour).Err(); err != nil {
		t.Fatal(err)
	}
	began := time.Now()
	_, err = r.Obtain(guard, "k", time.Hour)
	took := time.Since(began)
	if !errors.Is(err, ErrNotObtained) || guard.Err() != nil {
		t.Fatalf("Obtain needing a paused master = %v (guard's context: %v), want ErrNotObtained at the node timeout", err, guard.Err())
	}
	if took < timeout {
		t.Errorf("Obtain needing a paused master gave up after %v, before the node timeout %v", took, timeout)
	}

	// Resumed, the paused masters set the lock late, and are released
	// right after: only the other owner's lock remains.
	for _, s := range servers[:2] {
		if err := s.Proc.Resume(); err != nil {
			t.Fatal(err)
		}
	}
	deadline := time.Now().Add(30 * time.Second) // a hang guard only
	for {
		on := lockedOn(t, r, clients, "k")
		if len(on) == 1 && on[0] == 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("lock set on masters %v after the paused ones resumed, want only master 2 (the other owner's)", on)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestRedlock_Refresh_lost: a lock deleted from a majority behind the
// holder's back cannot be refreshed, and the handle stays lost.
func TestRedlock_Refresh_lost(t *testing.T) {
	_, clients := masters(t, 5)
	r, err := NewRedlock(clients, WithNodeTimeout(testNodeTimeout))
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	l, err := r.Obtain(ctx, "k", testLease)
	if err != nil {
		t.Fatal(err)
	}
	before := l.ValidUntil()
	time.Sleep(10 * time.Millisecond)
	if err := l.Refresh(ctx, testLease); err != nil {
		t.Fatal(err)
	}
	if !l.ValidUntil().After(before) {
		t.Fatalf("Refresh did not move the validity: %v, was %v", l.ValidUntil(), before)
	}
	for i := range 3 {
		clients[i].Del(ctx, r.LockKey("k"))
	}
	if err := l.Refresh(ctx, testLease); !errors.Is(err, ErrNotHeld) || errors.Is(err, ErrExpired) {
		t.Fatalf("Refresh of a lock gone from 3 of 5 masters = %v, want ErrNotHeld", err)
	}
	if l.Valid() {
		t.Fatal("Valid() after the lock was found lost")
	}
	if err := l.Release(ctx); !errors.Is(err, ErrNotHeld) {
		t.Fatalf("Release of a lost lock = %v, want ErrNotHeld", err)
	}
	if on := lockedOn(t, r, clients, "k"); len(on) != 0 {
		t.Fatalf("lock still set on masters %v after Release", on)
	}
}

func TestRedlock_Obtain_invalid(t *testing.T) {
	c := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"})
	c.Close()
	r, err := NewRedlock([]redis.UniversalClient{c, c, c})
	if err != nil {
		t.Fatal(err)
	}
	if r.Quorum() != 2 {
		t.Fatalf("Quorum of 3 = %d", r.Quorum())
	}
	ctx := t.Context()
	for name, opts := range map[string][]ObtainOption{
		"Notify":    {Notify()},
		"Watchdog":  {Watchdog()},
		"MaxHold":   {MaxHold(time.Second)},
		"Reentrant": {Reentrant(NewOwner())},
	} {
		if _, err := r.Obtain(ctx, "k", time.Second, opts...); !errors.Is(err, stockguard.ErrInvalidRequest) {
			t.Errorf("Obtain with %s = %v, want ErrInvalidRequest", name, err)
		}
	}
	if _, err := r.Obtain(ctx, "k", 0); !errors.Is(err, stockguard.ErrInvalidRequest) {
		t.Errorf("Obtain with ttl 0 = %v, want ErrInvalidRequest", err)
	}
	if _, err := r.Obtain(ctx, "k", time.Second); !errors.Is(err, ErrNotObtained) {
		t.Errorf("Obtain with every master down = %v, want ErrNotObtained", err)
	}
}
