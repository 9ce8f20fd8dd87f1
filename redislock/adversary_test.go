package redislock

import (
	"testing"

	"github.com/stockguard/stockguard"
	"github.com/stockguard/stockguard/internal/backends/backendstest"
	"github.com/stockguard/stockguard/internal/must"
	"github.com/stockguard/stockguard/internal/netgate"
	"github.com/stockguard/stockguard/internal/redistest"
	"github.com/stockguard/stockguard/stocktest"
)

// The adversarial checker over Atomic's orders on one Redis, in both
// ways it runs an order (one script; the two-phase protocol, forced),
// with callers that give up and repeat on another instance.
func TestAtomic_adversary(t *testing.T) {
	rdb := backendstest.RedisClient(t)
	for _, m := range orderModes {
		t.Run(m.name, func(t *testing.T) {
			prefix := redistest.Prefix(t, rdb)
			insts := []stockguard.Orders{newOrders(rdb, prefix, m.twoPhase), newOrders(rdb, prefix, m.twoPhase), newOrders(rdb, prefix, m.twoPhase)}
			stocktest.Adversary{}.RunOrders(t, insts)
		})
	}
}

// The Inventory workload over the strategies that share one stock key
// per SKU, and over Guarded, whose writes only its own lock orders.
func TestInventory_adversary(t *testing.T) {
	rdb := backendstest.RedisClient(t)
	t.Run("atomic+batched", func(t *testing.T) {
		prefix := redistest.Prefix(t, rdb)
		stocktest.Adversary{}.RunInventory(t, []stockguard.Inventory{
			must.New(NewAtomic(rdb, WithPrefix(prefix))), must.New(NewBatched(rdb, WithPrefix(prefix))),
		})
	})
	t.Run("guarded", func(t *testing.T) {
		prefix := redistest.Prefix(t, rdb)
		stocktest.Adversary{}.RunInventory(t, []stockguard.Inventory{must.New(NewGuarded(rdb, WithPrefix(prefix))), must.New(NewGuarded(rdb, WithPrefix(prefix)))})
	})
}

// The adversarial checker over Atomic's orders with every connection
// behind a network that holds a share of the requests past their
// callers' deadlines and delivers them later, after the repeats: on one
// Redis in both order modes, and on the Cluster.
func TestAtomic_adversaryLateNetwork(t *testing.T) {
	for _, m := range orderModes {
		t.Run(m.name, func(t *testing.T) {
			l := netgate.Adversarial(t)
			rdb := redistest.LateClient(t, backendstest.SharedRedis(t).Addr, l)
			prefix := redistest.Prefix(t, backendstest.RedisClient(t))
			insts := []stockguard.Orders{newOrders(rdb, prefix, m.twoPhase), newOrders(rdb, prefix, m.twoPhase), newOrders(rdb, prefix, m.twoPhase)}
			stocktest.Adversary{Seed: l.Seed(), Late: l.Max()}.RunOrders(t, insts)
			l.Check(t)
		})
	}
	t.Run("cluster", func(t *testing.T) {
		l := netgate.Adversarial(t)
		cluster := backendstest.SharedCluster(t)
		rdb := redistest.LateCluster(t, cluster.Addrs(), cluster.Dial, l)
		prefix := redistest.Prefix(t, clusterClient(t))
		insts := []stockguard.Orders{must.New(NewAtomic(rdb, WithPrefix(prefix))), must.New(NewAtomic(rdb, WithPrefix(prefix))), must.New(NewAtomic(rdb, WithPrefix(prefix)))}
		stocktest.Adversary{Seed: l.Seed(), Late: l.Max()}.RunOrders(t, insts)
		l.Check(t)
	})
}

// The Inventory workload through the late network, over the strategies
// that share one stock key per SKU.
func TestInventory_adversaryLateNetwork(t *testing.T) {
	l := netgate.Adversarial(t)
	rdb := redistest.LateClient(t, backendstest.SharedRedis(t).Addr, l)
	prefix := redistest.Prefix(t, backendstest.RedisClient(t))
	stocktest.Adversary{Seed: l.Seed(), Late: l.Max()}.RunInventory(t, []stockguard.Inventory{
		must.New(NewAtomic(rdb, WithPrefix(prefix))), must.New(NewBatched(rdb, WithPrefix(prefix))),
	})
	l.Check(t)
}
