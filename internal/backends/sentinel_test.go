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
	for i := range 3 {
		old, err := s.Master(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if err := c.Set(ctx, "k", i, 0).Err(); err != nil {
			t.Fatal(err)
		}
		if err := c.Wait(ctx, 1, 5000).Err(); err != nil {
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
