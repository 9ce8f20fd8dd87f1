package watchtx

import (
	"sync/atomic"
	"testing"

	"github.com/redis/go-redis/v9"
	"github.com/stockguard/stockguard/internal/backends/backendstest"
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
	checkRetriedOnce(t, New(rdb, WithPrefix(prefix)), &writes)
}
