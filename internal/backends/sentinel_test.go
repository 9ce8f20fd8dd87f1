package backends

import (
	"context"
	"testing"
	"time"
)

// TestSentinel_failsOverAndBack kills the master of a private Sentinel
// topology twice in a row: each time the Sentinels must promote the
// replica, a failover client must write to it, and the killed node must
// come back as its replica, so that the topology can fail over again.
func TestSentinel_failsOverAndBack(t *testing.T) {
	skipShort(t)
	ctx := t.Context()
	s, err := StartLocalSentinel(ctx, 1)
	if err != nil {
		unavailable(t, err)
	}
	t.Cleanup(func() { s.Close() })
	c := s.Client(4)
	t.Cleanup(func() { c.Close() })
	for i := range 2 {
		old, err := s.Master(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if err := c.Set(ctx, "k", i, 0).Err(); err != nil {
			t.Fatal(err)
		}
		if err := c.Wait(ctx, 1, 5*time.Second).Err(); err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		if err := old.Proc.Kill(); err != nil {
			t.Fatal(err)
		}
		wctx, cancel := context.WithTimeout(ctx, time.Minute)
		m, err := s.WaitPromoted(wctx, old.Link.Addr)
		cancel()
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("failover %d: %s promoted in %v", i, m.Link.Addr, time.Since(start).Round(time.Millisecond))
		// The client's pooled connections to the dead master fail until
		// it has heard of the switch.
		var got int
		for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
			got, err = c.Get(ctx, "k").Int()
			if err == nil || time.Now().After(deadline) {
				break
			}
		}
		if err != nil || got != i {
			t.Fatalf("after failover %d: k = %d, %v; want %d (written and acknowledged by a replica)", i, got, err, i)
		}
		if err := s.Restore(ctx, old); err != nil {
			t.Fatal(err)
		}
		t.Logf("failover %d: healthy again %v after the kill", i, time.Since(start).Round(time.Millisecond))
	}
}

// TestSentinel_heldLinkLosesTheLag writes while the master's Link is held,
// kills the master and checks the promoted replica lacks that write: the
// lag the failover fault relies on is real, not left to socket buffers.
func TestSentinel_heldLinkLosesTheLag(t *testing.T) {
	skipShort(t)
	ctx := t.Context()
	s, err := StartLocalSentinel(ctx, 1)
	if err != nil {
		unavailable(t, err)
	}
	t.Cleanup(func() { s.Close() })
	c := s.Client(4)
	t.Cleanup(func() { c.Close() })
	old, err := s.Master(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Set(ctx, "before", 1, 0).Err(); err != nil {
		t.Fatal(err)
	}
	if n, err := c.Wait(ctx, 1, 5*time.Second).Result(); err != nil || n != 1 {
		t.Fatalf("WAIT before the hold: %d, %v", n, err)
	}
	old.Link.Hold()
	if err := c.Set(ctx, "during", 1, 0).Err(); err != nil {
		t.Fatal(err)
	}
	if n, err := c.Wait(ctx, 1, 300*time.Millisecond).Result(); err != nil || n != 0 {
		t.Fatalf("WAIT during the hold: %d replicas, %v; want 0", n, err)
	}
	if err := old.Proc.Kill(); err != nil {
		t.Fatal(err)
	}
	old.Link.Cut()
	wctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	if _, err := s.WaitPromoted(wctx, old.Link.Addr); err != nil {
		t.Fatal(err)
	}
	old.Link.Heal()
	var before, during int64
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		before, err = c.Exists(ctx, "before").Result()
		if err == nil {
			during, err = c.Exists(ctx, "during").Result()
		}
		if err == nil || time.Now().After(deadline) {
			break
		}
	}
	if err != nil || before != 1 || during != 0 {
		t.Fatalf("on the new master: before %d, during %d, %v; want 1, 0", before, during, err)
	}
	if err := s.Restore(ctx, old); err != nil {
		t.Fatal(err)
	}
}
