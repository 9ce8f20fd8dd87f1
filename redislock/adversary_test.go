package redislock

import (
	"testing"

	"github.com/stockguard/stockguard"
	"github.com/stockguard/stockguard/internal/backends/backendstest"
	"github.com/stockguard/stockguard/internal/must"
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
