package watchtx

import (
	"testing"

	"github.com/stockguard/stockguard"
	"github.com/stockguard/stockguard/internal/backends/backendstest"
	"github.com/stockguard/stockguard/internal/must"
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
