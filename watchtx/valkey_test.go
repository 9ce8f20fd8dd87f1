package watchtx

import (
	"testing"

	"github.com/redis/go-redis/v9"
	"github.com/stockguard/stockguard"
	"github.com/stockguard/stockguard/internal/backends/backendstest"
	"github.com/stockguard/stockguard/internal/must"
	"github.com/stockguard/stockguard/internal/redistest"
	"github.com/stockguard/stockguard/stocktest"
)

// TestValkey_conformance runs the conformance suite on Valkey: one server
// and a 3-master cluster.
func TestValkey_conformance(t *testing.T) {
	single := backendstest.ValkeyClient(t)
	cluster := backendstest.SharedValkeyCluster(t).Client()
	t.Cleanup(func() { cluster.Close() })
	for _, c := range []struct {
		name string
		rdb  redis.UniversalClient
	}{{"single", single}, {"cluster", cluster}} {
		t.Run(c.name, func(t *testing.T) {
			prefix := redistest.Prefix(t, c.rdb)
			stocktest.Run(t, func(*testing.T) stockguard.Inventory { return must.New(New(c.rdb, WithPrefix(prefix))) })
		})
	}
}
