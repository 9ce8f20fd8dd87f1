package redislock

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stockguard/stockguard"
	"github.com/stockguard/stockguard/internal/backends/backendstest"
	"github.com/stockguard/stockguard/internal/must"
	"github.com/stockguard/stockguard/internal/redistest"
	"github.com/stockguard/stockguard/stocktest"
)

func TestAtomic_conformanceOrdersCluster(t *testing.T) {
	rdb := clusterClient(t)
	prefix := redistest.Prefix(t, rdb)
	suite := stocktest.Suite{Footprint: footprint(t, rdb, prefix)}
	suite.RunOrders(t, func(t *testing.T) stockguard.Orders { return must.New(NewAtomic(rdb, WithPrefix(prefix))) })
}

// spreadSKUs returns n SKUs whose stock keys are on n different masters
// of the cluster, none on the master of the record of id.
func spreadSKUs(t *testing.T, a *Atomic, masters map[uint16]string, id string, n int) []string {
	t.Helper()
	used := map[string]bool{masters[slot(a.orderKey(id))]: true}
	var skus []string
	for i := 0; len(skus) < n && i < 1000; i++ {
		sku := fmt.Sprintf("sku-%d", i)
		if m := masters[slot(a.keys.Stock(sku))]; !used[m] {
			used[m] = true
			skus = append(skus, sku)
		}
	}
	if len(skus) < n {
		t.Fatalf("found %d SKUs on distinct masters, want %d", len(skus), n)
	}
	return skus
}

// clusterMasters maps each slot of the cluster to its master's index.
func clusterMasters(t *testing.T, rdb *redis.ClusterClient) map[uint16]string {
	t.Helper()
	masters := map[uint16]string{}
	shards, err := rdb.ClusterShards(t.Context()).Result()
	if err != nil {
		t.Fatal(err)
	}
	for i, sh := range shards {
		for _, r := range sh.Slots {
			for s := r.Start; s <= r.End; s++ {
				masters[uint16(s)] = fmt.Sprint(i)
			}
		}
	}
	return masters
}

// TestAtomic_cluster_slowReturn is TestAtomic_twoPhase_slowReturn with the
// order's record and its two lines on the three masters of a real cluster.
func TestAtomic_cluster_slowReturn(t *testing.T) {
	rdb := clusterClient(t)
	masters := clusterMasters(t, rdb)
	slowReturn(t, func(t *testing.T) (*Atomic, []string) {
		a, err := NewAtomic(rdb, WithPrefix(redistest.Prefix(t, rdb)))
		if err != nil {
			t.Fatal(err)
		}
		skus := spreadSKUs(t, a, masters, "o", 2)
		if a.oneSlot("o", []stockguard.Line{line(skus[0], 1), line(skus[1], 1)}) {
			t.Fatal("the cart's keys share a slot; the test needs them apart")
		}
		return a, skus
	})
}

// TestAtomic_cluster_killedBetweenPhases takes a cart whose record and two
// lines are on the three masters of a real cluster, and kills its client
// between the phases: the pending deadline gives the units back, a retry
// finishes the order, and nothing is taken twice.
func TestAtomic_cluster_killedBetweenPhases(t *testing.T) {
	rdb := clusterClient(t)
	ctx := t.Context()
	masters := clusterMasters(t, rdb)
	const window = 300 * time.Millisecond
	var other, dying *Atomic
	var skus []string
	var cart []stockguard.Line
	withinWindow(t, window, func() (time.Time, error) {
		prefix := redistest.Prefix(t, rdb) // fresh keys each try
		var err error
		if other, err = NewAtomic(rdb, WithPrefix(prefix)); err != nil {
			t.Fatal(err)
		}
		other.pending = window
		skus = spreadSKUs(t, other, masters, "cart", 2)
		stockAll(t, other, 10, skus...)
		cart = []stockguard.Line{line(skus[0], 3), line(skus[1], 4)}
		if other.oneSlot("cart", cart) {
			t.Fatal("the cart's keys share a slot; the test needs them apart")
		}
		if dying, err = NewAtomic(rdb, WithPrefix(prefix)); err != nil {
			t.Fatal(err)
		}
		dying.pending, dying.hook = window, killAt("taken")
		began := time.Now()
		if err := dying.Take(ctx, "cart", cart...); !errors.Is(err, errKilled) {
			t.Fatalf("Take = %v, want it killed", err)
		}
		if err := other.Decrement(ctx, skus[1], 7); !errors.Is(err, stockguard.ErrInsufficientStock) {
			return began, fmt.Errorf("Decrement of a pending order's units: %v, want ErrInsufficientStock", err)
		}
		return began, nil
	})
	time.Sleep(window + 50*time.Millisecond)
	wantLevels(t, other, map[string]int64{skus[0]: 10, skus[1]: 10})
	wantState(t, other, "cart", 0)

	dying.hook = killAt("taken")
	if err := dying.Hold(ctx, "cart", time.Minute, cart...); !errors.Is(err, errKilled) {
		t.Fatalf("Hold = %v, want it killed", err)
	}
	for range 2 {
		if err := other.Hold(ctx, "cart", time.Minute, cart...); err != nil {
			t.Fatalf("retry of the killed Hold: %v", err)
		}
	}
	if err := other.Confirm(ctx, "cart"); err != nil {
		t.Fatal(err)
	}
	time.Sleep(window + 50*time.Millisecond)
	wantLevels(t, other, map[string]int64{skus[0]: 7, skus[1]: 6})
	wantState(t, other, "cart", stockguard.OrderTaken)
	if err := other.Return(ctx, "cart"); err != nil {
		t.Fatal(err)
	}
	wantLevels(t, other, map[string]int64{skus[0]: 10, skus[1]: 10})
}

// TestAtomic_ring_refused: NewAtomic over a go-redis Ring refuses every
// call, before any I/O, with an error wrapping ErrInvalidRequest. A Ring
// sends a shard's keys elsewhere while it votes the shard down, where an
// order's record looks absent (read as "give the units back") and a SKU's
// level unknown or stale.
func TestAtomic_ring_refused(t *testing.T) {
	// Addresses nothing listens on: a call that did any I/O would fail
	// otherwise, and slowly.
	rdb := redis.NewRing(&redis.RingOptions{Addrs: map[string]string{"a": "127.0.0.1:1", "b": "127.0.0.1:2"}})
	t.Cleanup(func() { rdb.Close() })
	if a, err := NewAtomic(rdb); a != nil || !errors.Is(err, stockguard.ErrInvalidRequest) || !strings.Contains(err.Error(), "Ring") {
		t.Errorf("NewAtomic over a Ring = %v, %v; want nil and ErrInvalidRequest naming the Ring", a, err)
	}
}

// TestAtomic_Orders_refuseEviction: on a server that may evict keys
// (maxmemory with a policy other than noeviction), every Orders method
// fails with ErrUnavailable before it writes; noeviction passes.
func TestAtomic_Orders_refuseEviction(t *testing.T) {
	srv := backendstest.PrivateRedis(t, 1, "--maxmemory", "64mb", "--maxmemory-policy", "volatile-lru")[0]
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr})
	t.Cleanup(func() { rdb.Close() })
	ctx := t.Context()
	for _, twoPhase := range []bool{false, true} {
		a := newOrders(rdb, redistest.Prefix(t, rdb), twoPhase)
		stockAll(t, a, 10, "a")
		err := a.Take(ctx, "o", line("a", 1))
		if !errors.Is(err, stockguard.ErrUnavailable) || !strings.Contains(err.Error(), "volatile-lru") {
			t.Fatalf("Take under volatile-lru = %v, want ErrUnavailable naming the policy", err)
		}
		if _, err := a.Order(ctx, "o"); !errors.Is(err, stockguard.ErrUnavailable) {
			t.Fatalf("Order under volatile-lru = %v, want ErrUnavailable", err)
		}
		wantLevels(t, a, map[string]int64{"a": 10})
	}
	if err := rdb.ConfigSet(ctx, "maxmemory-policy", "noeviction").Err(); err != nil {
		t.Fatal(err)
	}
	a := newOrders(rdb, redistest.Prefix(t, rdb), true)
	stockAll(t, a, 10, "a")
	if err := a.Take(ctx, "o", line("a", 1)); err != nil {
		t.Fatalf("Take under noeviction: %v", err)
	}
	wantLevels(t, a, map[string]int64{"a": 9})
}
