package watchtx

import (
	"testing"

	"github.com/stockguard/stockguard"
	"github.com/stockguard/stockguard/internal/backends/backendstest"
	"github.com/stockguard/stockguard/internal/must"
	"github.com/stockguard/stockguard/internal/netgate"
	"github.com/stockguard/stockguard/internal/redistest"
	"github.com/stockguard/stockguard/stocktest"
)

// The adversarial checker's Inventory workload: decrements that give up
// at any point of the WATCH/MULTI/EXEC round trips, on three instances.
func TestInventory_adversary(t *testing.T) {
	rdb := backendstest.RedisClient(t)
	prefix := redistest.Prefix(t, rdb)
	stocktest.Adversary{}.RunInventory(t, []stockguard.Inventory{
		must.New(New(rdb, WithPrefix(prefix))), must.New(New(rdb, WithPrefix(prefix))), must.New(New(rdb, WithPrefix(prefix))),
	})
}

// The Inventory workload with every connection behind a network that
// holds a share of the requests past their callers' deadlines and
// delivers them later: a WATCH, MULTI or EXEC may land after its caller
// left and after other instances' decrements.
func TestInventory_adversaryLateNetwork(t *testing.T) {
	l := netgate.Adversarial(t)
	rdb := redistest.LateClient(t, backendstest.SharedRedis(t).Addr, l)
	prefix := redistest.Prefix(t, backendstest.RedisClient(t))
	stocktest.Adversary{Seed: l.Seed(), Late: l.Max()}.RunInventory(t, []stockguard.Inventory{
		must.New(New(rdb, WithPrefix(prefix))), must.New(New(rdb, WithPrefix(prefix))), must.New(New(rdb, WithPrefix(prefix))),
	})
	l.Check(t)
}
