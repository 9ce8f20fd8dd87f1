package lock

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// waitQueued waits until n Obtains of c wait for key's lock.
func waitQueued(t *testing.T, c *Client, key string, n int) {
	t.Helper()
	channel := c.keysFor(key, true).lock
	deadline := time.Now().Add(30 * time.Second) // a hang guard only
	for time.Now().Before(deadline) {
		c.notify.mu.Lock()
		var have int
		if tp := c.notify.topics[channel]; tp != nil {
			have = len(tp.waiters)
		}
		c.notify.mu.Unlock()
		if have >= n {
			return
		}
		time.Sleep(time.Millisecond)
	}
	t.Fatalf("fewer than %d waiters on %q after 30s", n, key)
}

func TestLock_Release_handsOverToWaiterOfSameClient(t *testing.T) {
	c, rdb := newTestClient(t)
	ctx := t.Context()
	held, err := c.Obtain(ctx, "k", 30*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan *Lock, 1)
	go func() {
		// The fallback is far beyond the test's patience: only a
		// hand-over or an announcement can wake it in time.
		l, err := c.Obtain(ctx, "k", 20*time.Second, Notify(), ObtainRetry(LinearBackoff(time.Minute)))
		if err != nil {
			t.Error(err)
		}
		got <- l
	}()
	waitQueued(t, c, "k", 1)
	hook := &scriptHook{script: lockReleaseScript}
	rdb.AddHook(hook)
	if err := held.Release(ctx); err != nil {
		t.Fatal(err)
	}
	l := <-got
	if l == nil {
		t.FailNow()
	}
	if n := hook.runs.Load(); n != 0 {
		t.Errorf("%d release scripts ran: the lock was freed, not handed over", n)
	}
	if l.Token() != held.Token()+1 {
		t.Errorf("token after the hand-over = %d, want the holder's %d + 1", l.Token(), held.Token())
	}
	if v := rdb.Get(ctx, c.LockKey("k")).Val(); v != l.OwnerToken() {
		t.Errorf("lock key holds %q, want the new holder's owner token %q", v, l.OwnerToken())
	}
	if left, err := l.TTL(ctx); err != nil || left <= 10*time.Second {
		t.Errorf("TTL after the hand-over = %v, %v; want the waiter's 20s lease", left, err)
	}
	if err := held.Release(ctx); !errors.Is(err, ErrNotHeld) {
		t.Errorf("second Release of the old handle = %v, want ErrNotHeld", err)
	}
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if n := rdb.Exists(ctx, c.LockKey("k")).Val(); n != 0 {
		t.Fatal("the lock is still set after the last Release")
	}
}

func TestLock_Release_noHandOverToReentrantOrIfExistsWaiter(t *testing.T) {
	c, rdb := newTestClient(t)
	ctx := t.Context()
	rdb.Set(ctx, c.keys.Stock("k"), 1, time.Minute)
	for _, tc := range []struct {
		name string
		opts []ObtainOption
	}{
		{"reentrant", []ObtainOption{Reentrant(NewOwner())}},
		{"ifexists", []ObtainOption{IfExists(c.keys.Stock("k"))}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			held, err := c.Obtain(ctx, "k", 30*time.Second)
			if err != nil {
				t.Fatal(err)
			}
			got := make(chan *Lock, 1)
			go func() {
				l, err := c.Obtain(ctx, "k", 20*time.Second, append(tc.opts, Notify(), ObtainRetry(LinearBackoff(time.Minute)))...)
				if err != nil {
					t.Error(err)
				}
				got <- l
			}()
			waitQueued(t, c, "k", 1)
			hook := &scriptHook{script: lockReleaseScript}
			rdb.AddHook(hook)
			if err := held.Release(ctx); err != nil {
				t.Fatal(err)
			}
			l := <-got
			if l == nil {
				t.FailNow()
			}
			if hook.runs.Load() != 1 {
				t.Errorf("%d release scripts ran, want 1: the lock must be freed and announced", hook.runs.Load())
			}
			if err := l.Release(ctx); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestNotify_waiterElsewhereGetsItsTurn: while the goroutines of one
// Client hand the lock round among themselves, a waiter of another Client
// (another process) still obtains it: every maxHandoffs+1-th release frees
// the lock and announces it.
func TestNotify_waiterElsewhereGetsItsTurn(t *testing.T) {
	a, rdb := newTestClient(t)
	b, err := New(rdb, WithPrefix(a.keys.Prefix))
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var cycles atomic.Int64
	for range 8 {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				l, err := a.Obtain(ctx, "k", 10*time.Second, Notify(), ObtainRetry(LinearBackoff(time.Minute)))
				if err != nil {
					t.Error(err)
					return
				}
				time.Sleep(100 * time.Microsecond)
				if err := l.Release(ctx); err != nil {
					t.Error(err)
					return
				}
				cycles.Add(1)
			}
		})
	}
	defer func() { close(stop); wg.Wait() }()
	waitQueued(t, a, "k", 4)
	octx, cancel := context.WithTimeout(ctx, 30*time.Second) // a hang guard, within the minute's fallback poll
	defer cancel()
	start := cycles.Load()
	l, err := b.Obtain(octx, "k", 10*time.Second, Notify(), ObtainRetry(LinearBackoff(time.Minute)))
	if err != nil {
		t.Fatalf("the other Client's waiter: %v (after %d cycles of the first Client's)", err, cycles.Load()-start)
	}
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestLock_Release_handOverToWaiterThatGaveUpIsGivenBack: a waiter whose
// context ends while a hand-over to it is in flight waits for the outcome,
// and gives back the lock it was handed.
func TestLock_Release_handOverToWaiterThatGaveUpIsGivenBack(t *testing.T) {
	c, rdb := newTestClient(t)
	ctx := t.Context()
	held, err := c.Obtain(ctx, "k", 30*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithCancel(ctx)
	errs := make(chan error, 1)
	go func() {
		_, err := c.Obtain(wctx, "k", 20*time.Second, Notify(), ObtainRetry(LinearBackoff(time.Minute)))
		errs <- err
	}()
	waitQueued(t, c, "k", 1)
	w := c.notify.claim(held.keys.lock) // the release's first step, by hand
	if w == nil {
		t.Fatal("no waiter to claim")
	}
	cancel()
	select {
	case err := <-errs:
		t.Fatalf("Obtain returned (%v) while a hand-over to it was in flight", err)
	case <-time.After(50 * time.Millisecond):
	}
	if ok, err := held.handOver(ctx, w); !ok || err != nil {
		t.Fatalf("handOver = %v, %v", ok, err)
	}
	if err := <-errs; !errors.Is(err, ErrNotObtained) || !errors.Is(err, context.Canceled) {
		t.Fatalf("Obtain whose context ended = %v, want ErrNotObtained and context.Canceled", err)
	}
	if n := rdb.Exists(ctx, c.LockKey("k")).Val(); n != 0 {
		t.Fatalf("the lock handed to the waiter that gave up is still set (%q)", rdb.Get(ctx, c.LockKey("k")).Val())
	}
}
