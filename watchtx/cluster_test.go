package watchtx

import (
	"context"
	"errors"
	"slices"
	"sync/atomic"
	"testing"

	"github.com/redis/go-redis/v9"
	"github.com/stockguard/stockguard"
	"github.com/stockguard/stockguard/internal/backends"
	"github.com/stockguard/stockguard/internal/backends/backendstest"
	"github.com/stockguard/stockguard/internal/must"
	"github.com/stockguard/stockguard/internal/rediskeys"
	"github.com/stockguard/stockguard/internal/redistest"
)

// TestInventory_cluster_retriesOnConflict forces a conflict on a Redis
// Cluster: WATCH, GET and EXEC run on the master of the key's slot (a node
// client, hence the hook installed on every node), another client writes
// the key in between, and the retry succeeds.
func TestInventory_cluster_retriesOnConflict(t *testing.T) {
	cluster := backendstest.SharedCluster(t)
	other := cluster.Client()
	t.Cleanup(func() { other.Close() })
	prefix := redistest.Prefix(t, other)
	key := rediskeys.Keys{Prefix: prefix}.Stock("sku")

	var writes atomic.Int64
	rdb := cluster.Client()
	t.Cleanup(func() { rdb.Close() })
	rdb.OnNewNode(func(node *redis.Client) {
		node.AddHook(conflictingWrite(t, other, key, &writes))
	})
	checkRetriedOnce(t, must.New(New(rdb, WithPrefix(prefix))), &writes)
}

// TestInventory_cluster_redirectsExhaustedTakeNothingSilently: a
// ClusterClient whose slot map is stale (here the SKU's slot moved to
// another master; in the failover suite, a master killed and its replica
// promoted) gets MOVED for the WATCH. When its redirects run out there,
// go-redis's ClusterClient.Watch returns nil without ever calling the
// transaction function; a Decrement that took that nil for success
// acknowledged units it never took (the loss the failover suite found in
// redis-cluster-watchtx-ack). It must fail, ErrUnavailable, nothing taken.
func TestInventory_cluster_redirectsExhaustedTakeNothingSilently(t *testing.T) {
	cluster := backendstest.SharedCluster(t)
	ctx := t.Context()
	admin := cluster.Client()
	t.Cleanup(func() { admin.Close() })
	prefix := redistest.Prefix(t, admin)
	key := rediskeys.Keys{Prefix: prefix}.Stock("sku")
	slot, err := admin.ClusterKeySlot(ctx, key).Result()
	if err != nil {
		t.Fatal(err)
	}

	// No redirect followed: the first MOVED exhausts the budget, as the
	// last of the default 3 does in a failover.
	stale := redis.NewClusterClient(&redis.ClusterOptions{Addrs: cluster.Addrs(), MaxRedirects: -1})
	t.Cleanup(func() { stale.Close() })
	inv, err := New(stale, WithPrefix(prefix))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := inv.Stock(ctx, "sku"); !errors.Is(err, stockguard.ErrUnknownSKU) {
		t.Fatalf("Stock before: %v, want ErrUnknownSKU (the slot map loaded)", err)
	}

	from, _ := moveSlot(t, cluster, int(slot), -1)
	t.Cleanup(func() {
		admin.Del(context.Background(), key)
		moveSlot(t, cluster, int(slot), from)
	})
	if err := must.New(New(admin, WithPrefix(prefix))).SetStock(ctx, "sku", 10); err != nil {
		t.Fatal(err)
	}

	err = inv.Decrement(ctx, "sku", 3)
	left, serr := must.New(New(admin, WithPrefix(prefix))).Stock(ctx, "sku")
	if serr != nil {
		t.Fatal(serr)
	}
	if err == nil && left == 10 {
		t.Fatalf("Decrement = nil, yet the stock is still 10: acknowledged without taking")
	}
	if !errors.Is(err, stockguard.ErrUnavailable) || left != 10 {
		t.Fatalf("Decrement = %v with %d left, want ErrUnavailable and 10 left", err, left)
	}
}

// moveSlot reassigns slot, which must hold no key, from its master to the
// master at index to of cluster.Nodes (-1: the next one), on every master,
// and returns the indexes of both.
func moveSlot(t *testing.T, cluster *backends.Cluster, slot, to int) (from, dest int) {
	t.Helper()
	ctx := context.Background()
	ids := make([]string, len(cluster.Nodes))
	for i, n := range cluster.Nodes {
		cl := n.Client()
		id, err := cl.Do(ctx, "cluster", "myid").Text()
		cl.Close()
		if err != nil {
			t.Fatal(err)
		}
		ids[i] = id
	}
	cl := cluster.Nodes[0].Client()
	shards, err := cl.ClusterShards(ctx).Result()
	cl.Close()
	if err != nil {
		t.Fatal(err)
	}
	from = -1
	for _, sh := range shards {
		for _, r := range sh.Slots {
			if r.Start > int64(slot) || int64(slot) > r.End {
				continue
			}
			for _, n := range sh.Nodes {
				if i := slices.Index(ids, n.ID); i >= 0 && n.Role == "master" {
					from = i
				}
			}
		}
	}
	if from < 0 {
		t.Fatalf("no master owns slot %d", slot)
	}
	if to < 0 {
		to = (from + 1) % len(cluster.Nodes)
	}
	// The new owner first, with a config epoch of its own above every
	// other, so that the cluster settles on it.
	order := []int{to}
	for i := range cluster.Nodes {
		if i != to {
			order = append(order, i)
		}
	}
	for k, i := range order {
		cl := cluster.Nodes[i].Client()
		if k == 0 {
			if err := cl.Do(ctx, "cluster", "bumpepoch").Err(); err != nil {
				t.Fatal(err)
			}
		}
		err := cl.Do(ctx, "cluster", "setslot", slot, "node", ids[to]).Err()
		cl.Close()
		if err != nil {
			t.Fatalf("CLUSTER SETSLOT %d NODE on %s: %v", slot, cluster.Nodes[i].Addr, err)
		}
	}
	return from, to
}
