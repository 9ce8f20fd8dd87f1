package backends

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// TestStartLocalReplicated_waitCountsOnlyLiveReplicas writes on the master
// and reads the write back from the replica, then pauses the replica and
// checks that WAIT sees no acknowledgement until it is resumed.
func TestStartLocalReplicated_waitCountsOnlyLiveReplicas(t *testing.T) {
	skipShort(t)
	ctx := t.Context()
	r, err := StartLocalReplicated(ctx, 1)
	if err != nil {
		unavailable(t, err)
	}
	t.Cleanup(func() { r.Close() })
	m := r.Client()
	t.Cleanup(func() { m.Close() })
	s := r.Replicas[0].Client()
	t.Cleanup(func() { s.Close() })

	if err := m.Set(ctx, "k", "1", 0).Err(); err != nil {
		t.Fatal(err)
	}
	if n, err := m.Wait(ctx, 1, 5*time.Second).Result(); err != nil || n != 1 {
		t.Fatalf("WAIT 1 with a live replica: %d, %v", n, err)
	}
	if v, err := s.Get(ctx, "k").Result(); err != nil || v != "1" {
		t.Fatalf("replica has %q, %v after the ack", v, err)
	}

	if err := r.Replicas[0].Proc.Pause(); err != nil {
		t.Fatal(err)
	}
	if err := m.Set(ctx, "k", "2", 0).Err(); err != nil {
		t.Fatal(err)
	}
	if n, err := m.Wait(ctx, 1, 200*time.Millisecond).Result(); err != nil || n != 0 {
		t.Fatalf("WAIT 1 with the replica paused: %d, %v; want 0", n, err)
	}
	if err := r.Replicas[0].Proc.Resume(); err != nil {
		t.Fatal(err)
	}
	if err := r.WaitSynced(ctx); err != nil {
		t.Fatal(err)
	}
	if n, err := m.Wait(ctx, 1, 5*time.Second).Result(); err != nil || n != 1 {
		t.Fatalf("WAIT 1 after resume: %d, %v", n, err)
	}
	if v, err := s.Get(ctx, "k").Result(); err != nil || v != "2" {
		t.Fatalf("replica has %q, %v after resume", v, err)
	}
}

// TestStartLocalCluster_replicaPerMaster checks every replica follows the
// master it was started for.
func TestStartLocalCluster_replicaPerMaster(t *testing.T) {
	skipShort(t)
	ctx := t.Context()
	c, err := StartLocalCluster(ctx, 3, WithClusterReplicas(1))
	if err != nil {
		unavailable(t, err)
	}
	t.Cleanup(func() { c.Close() })
	if len(c.Replicas) != 3 {
		t.Fatalf("%d replica sets, want 3", len(c.Replicas))
	}
	for i, rs := range c.Replicas {
		if len(rs) != 1 {
			t.Fatalf("master %d has %d replicas, want 1", i, len(rs))
		}
		rc := rs[0].Client()
		role, err := rc.Do(ctx, "ROLE").Slice()
		rc.Close()
		if err != nil {
			t.Fatal(err)
		}
		_, port, _ := strings.Cut(c.Nodes[i].Addr, ":")
		if len(role) < 3 || role[0] != "slave" || fmt.Sprint(role[2]) != port {
			t.Errorf("replica %s: ROLE %v, want slave of port %s", rs[0].Addr, role, port)
		}
	}
	cc := c.Client()
	t.Cleanup(func() { cc.Close() })
	if err := cc.ForEachShard(ctx, func(ctx context.Context, n *redis.Client) error { return n.Ping(ctx).Err() }); err != nil {
		t.Fatal(err)
	}
}
