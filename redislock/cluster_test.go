package redislock

import (
	"strconv"
	"testing"

	"github.com/redis/go-redis/v9"
	"github.com/stockguard/stockguard"
	"github.com/stockguard/stockguard/internal/backends/backendstest"
	"github.com/stockguard/stockguard/internal/must"
	"github.com/stockguard/stockguard/internal/redistest"
	"github.com/stockguard/stockguard/redislock/lock"
	"github.com/stockguard/stockguard/stocktest"
)

// clusterClient returns a client on the test binary's shared 3-master
// Redis Cluster.
func clusterClient(t *testing.T) *redis.ClusterClient {
	t.Helper()
	rdb := backendstest.SharedCluster(t).Client()
	t.Cleanup(func() { rdb.Close() })
	return rdb
}

// oddSKUs are SKUs whose hash tags need care: braces, patterns, unicode.
var oddSKUs = []string{"hot", "{x}", "a}b{c", "}", "*", "库存-ü", "sku#3"}

// TestCluster_keysShareSlots checks every multi-key script's keys land in
// one slot, and that a SKU's segments do not.
func TestCluster_keysShareSlots(t *testing.T) {
	rdb := clusterClient(t)
	ctx := t.Context()
	slot := func(key string) int64 {
		t.Helper()
		n, err := rdb.ClusterKeySlot(ctx, key).Result()
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	same := func(what string, keys ...string) {
		t.Helper()
		for _, k := range keys[1:] {
			if slot(k) != slot(keys[0]) {
				t.Errorf("%s: %q and %q are in different slots", what, keys[0], k)
			}
		}
	}
	masterOf := map[int64]string{}
	shards, err := rdb.ClusterShards(ctx).Result()
	if err != nil {
		t.Fatal(err)
	}
	for i, sh := range shards {
		for _, r := range sh.Slots {
			for s := r.Start; s <= r.End; s++ {
				masterOf[s] = strconv.Itoa(i)
			}
		}
	}

	c, err := lock.New(rdb, lock.WithPrefix("p:"))
	if err != nil {
		t.Fatal(err)
	}
	s, err := NewSegmented(rdb, WithPrefix("p:"), WithSegmentLocks())
	if err != nil {
		t.Fatal(err)
	}
	store, err := NewRedisStore(rdb, WithPrefix("p:"))
	if err != nil {
		t.Fatal(err)
	}
	for _, sku := range oddSKUs {
		same("lock obtain", c.LockKey(sku), c.FenceKey(sku), store.levels.Keys.Stock(sku))
		same("guarded write", store.levels.Keys.Stock(sku), c.FenceKey(sku))
		same("segment meta, gather lock and counter", s.metaKey(sku), s.gather.LockKey(sku), s.gather.FenceKey(sku))
		slots := map[int64]bool{}
		nodes := map[string]bool{}
		for i := range DefaultSegments {
			sk := s.segKey(sku, i)
			same("segment take and hold", sk, s.holdKey(sku, i, "0123456789abcdef"))
			same("segment take under its lock", sk, s.segLocks.LockKey(segment(sku, i)))
			slots[slot(sk)] = true
			nodes[masterOf[slot(sk)]] = true
		}
		if len(slots) != DefaultSegments || len(nodes) < 2 {
			t.Errorf("the %d segments of %q are in %d slots on %d masters; want a slot each, on several masters",
				DefaultSegments, sku, len(slots), len(nodes))
		}
	}
}

func TestSegmented_conformanceCluster(t *testing.T) {
	rdb := clusterClient(t)
	for _, m := range segmentModes {
		t.Run(m.name, func(t *testing.T) {
			prefix := redistest.Prefix(t, rdb)
			// Stock is not linearizable: see TestSegmented_conformance.
			suite := stocktest.Suite{StockNotLinearizable: true}
			suite.Run(t, func(t *testing.T) stockguard.Inventory {
				return must.New(NewSegmented(rdb, append(m.opts, WithPrefix(prefix))...))
			})
		})
	}
}

func TestSegmented_cluster_soldOutExactlyUnderContention(t *testing.T) {
	rdb := clusterClient(t)
	for _, m := range segmentModes {
		t.Run(m.name, func(t *testing.T) {
			prefix := redistest.Prefix(t, rdb)
			soldOutExactly(t, func() *Segmented { return must.New(NewSegmented(rdb, append(m.opts, WithPrefix(prefix))...)) })
		})
	}
}

func TestGuarded_conformanceCluster(t *testing.T) {
	rdb := clusterClient(t)
	prefix := redistest.Prefix(t, rdb)
	stocktest.Run(t, func(t *testing.T) stockguard.Inventory { return must.New(NewGuarded(rdb, WithPrefix(prefix))) })
}
