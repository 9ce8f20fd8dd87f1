package lock

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stockguard/stockguard/internal/backends/backendstest"
	"github.com/stockguard/stockguard/internal/redistest"
)

// clusterClient returns a client on the test binary's shared 3-master
// Redis Cluster.
func clusterClient(t *testing.T) *redis.ClusterClient {
	t.Helper()
	rdb := backendstest.SharedCluster(t).Client()
	t.Cleanup(func() { rdb.Close() })
	return rdb
}

// TestClient_cluster runs the lock's life cycle on a cluster: plain and
// reentrant locks, fencing tokens, a watchdog, and a waiter woken by a
// release announced from another master's slot.
func TestClient_cluster(t *testing.T) {
	rdb := clusterClient(t)
	c, err := New(rdb, WithPrefix(redistest.Prefix(t, rdb)))
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()

	t.Run("plain", func(t *testing.T) {
		l, err := c.Obtain(ctx, "plain", time.Second)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.Obtain(ctx, "plain", time.Second); !errors.Is(err, ErrNotObtained) {
			t.Fatalf("second Obtain = %v, want ErrNotObtained", err)
		}
		if err := l.Refresh(ctx, 2*time.Second); err != nil {
			t.Fatal(err)
		}
		if ttl, err := l.TTL(ctx); err != nil || ttl <= time.Second {
			t.Fatalf("TTL after Refresh(2s) = %v, %v", ttl, err)
		}
		if err := l.Release(ctx); err != nil {
			t.Fatal(err)
		}
		next, err := c.Obtain(ctx, "plain", time.Second)
		if err != nil {
			t.Fatal(err)
		}
		defer next.Release(ctx)
		if next.Token() <= l.Token() {
			t.Fatalf("token %d after %d: not increasing", next.Token(), l.Token())
		}
	})

	t.Run("reentrant", func(t *testing.T) {
		owner := NewOwner()
		outer, err := c.Obtain(ctx, "re", time.Second, Reentrant(owner))
		if err != nil {
			t.Fatal(err)
		}
		inner, err := c.Obtain(ctx, "re", time.Second, Reentrant(owner))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.Obtain(ctx, "re", time.Second, Reentrant(NewOwner())); !errors.Is(err, ErrNotObtained) {
			t.Fatalf("foreign owner's Obtain = %v, want ErrNotObtained", err)
		}
		if err := inner.Release(ctx); err != nil {
			t.Fatal(err)
		}
		if _, err := outer.TTL(ctx); err != nil {
			t.Fatalf("outer hold after the inner release: %v", err)
		}
		if err := outer.Release(ctx); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("watchdog", func(t *testing.T) {
		// Held two leases after Obtain: renewed. A stall that loses the
		// lock (signalled) makes the attempt show nothing: try again.
		const ttl = 600 * time.Millisecond
		for attempt := range watchdogAttempts {
			key := fmt.Sprintf("wd%d", attempt)
			l, err := c.Obtain(ctx, key, ttl, Watchdog())
			if err != nil {
				t.Fatal(err)
			}
			if lostAt, _ := pollHeld(t, l, ttl/4, time.Now().Add(2*ttl), false); !lostAt.IsZero() {
				t.Logf("attempt %d: lock lost (signalled); trying again", attempt)
				continue
			}
			if err := l.Release(ctx); err != nil {
				t.Fatal(err)
			}
			return
		}
		t.Fatalf("the lock was lost in each of %d attempts: the watchdog did not keep it alive", watchdogAttempts)
	})

	t.Run("notify", func(t *testing.T) {
		holder, err := c.Obtain(ctx, "wait", 10*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		got := make(chan error, 1)
		go func() {
			// The fallback poll comes after a minute; only the release
			// announcement can wake the waiter within the hang guard below.
			l, err := c.Obtain(ctx, "wait", time.Second, Notify(), ObtainRetry(LinearBackoff(time.Minute)))
			if err == nil {
				err = l.Release(ctx)
			}
			got <- err
		}()
		waitQueued(t, c, "wait", 1) // the waiter tried, failed, and waits for the announcement
		released := time.Now()
		if err := holder.Release(ctx); err != nil {
			t.Fatal(err)
		}
		select {
		case err := <-got:
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("waiter obtained the lock %v after the release", time.Since(released))
		case <-time.After(30 * time.Second): // a hang guard, within the minute's fallback poll
			t.Fatal("waiter not woken by the release")
		}
	})
}
