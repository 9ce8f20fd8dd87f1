package redislock

import (
	"testing"

	"github.com/redis/go-redis/v9"
	"github.com/stockguard/stockguard"
	"github.com/stockguard/stockguard/internal/backends/backendstest"
	"github.com/stockguard/stockguard/internal/must"
	"github.com/stockguard/stockguard/internal/redistest"
	"github.com/stockguard/stockguard/stocktest"
)

// TestValkey_conformance runs every strategy of the package through the
// conformance suites on Valkey: one server and a 3-master cluster, and
// Redlock over three servers. Nothing in the package is Valkey-specific;
// this is what says so.
func TestValkey_conformance(t *testing.T) {
	single := backendstest.ValkeyClient(t)
	cluster := backendstest.SharedValkeyCluster(t).Client()
	t.Cleanup(func() { cluster.Close() })
	type strategy struct {
		name  string
		suite stocktest.Suite
		new   func(rdb redis.UniversalClient, prefix string) stockguard.Inventory
	}
	strategies := []strategy{
		{"atomic", stocktest.Suite{}, func(rdb redis.UniversalClient, p string) stockguard.Inventory {
			return must.New(NewAtomic(rdb, WithPrefix(p)))
		}},
		{"batched", stocktest.Suite{}, func(rdb redis.UniversalClient, p string) stockguard.Inventory {
			return must.New(NewBatched(rdb, WithPrefix(p)))
		}},
		{"guarded", stocktest.Suite{}, func(rdb redis.UniversalClient, p string) stockguard.Inventory {
			return must.New(NewGuarded(rdb, WithPrefix(p)))
		}},
	}
	for _, m := range segmentModes {
		// Stock is not linearizable: see TestSegmented_conformance.
		strategies = append(strategies, strategy{"segmented-" + m.name, stocktest.Suite{StockNotLinearizable: true},
			func(rdb redis.UniversalClient, p string) stockguard.Inventory {
				return must.New(NewSegmented(rdb, append(m.opts, WithPrefix(p))...))
			}})
	}
	for _, c := range []struct {
		name string
		rdb  redis.UniversalClient
	}{{"single", single}, {"cluster", cluster}} {
		t.Run(c.name, func(t *testing.T) {
			for _, s := range strategies {
				t.Run(s.name, func(t *testing.T) {
					prefix := redistest.Prefix(t, c.rdb)
					s.suite.Run(t, func(*testing.T) stockguard.Inventory { return s.new(c.rdb, prefix) })
				})
			}
			t.Run("orders", func(t *testing.T) {
				prefix := redistest.Prefix(t, c.rdb)
				suite := stocktest.Suite{Footprint: footprint(t, c.rdb, prefix)}
				suite.RunOrders(t, func(*testing.T) stockguard.Orders { return must.New(NewAtomic(c.rdb, WithPrefix(prefix))) })
			})
		})
	}
	t.Run("redlock", func(t *testing.T) {
		clients := make([]redis.UniversalClient, 3)
		for i, s := range backendstest.PrivateValkey(t, 3) {
			clients[i] = s.Client()
			t.Cleanup(func() { clients[i].Close() })
		}
		prefix := lockPrefix(t)
		stocktest.Run(t, func(t *testing.T) stockguard.Inventory {
			return must.New(NewRedlockGuarded(clients, WithPrefix(prefix), WithNodeTimeout(testNodeTimeout)))
		})
	})
}
