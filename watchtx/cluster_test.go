package watchtx

import (
	"context"
	"crypto/rand"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/redis/go-redis/v9"
	"github.com/stockguard/stockguard/internal/backends"
	"github.com/stockguard/stockguard/internal/rediskeys"
)

// TestInventory_cluster_retriesOnConflict forces a conflict on a Redis
// Cluster: WATCH, GET and EXEC run on the master of the key's slot (a node
// client, hence the hook installed on every node), another client writes
// the key in between, and the retry succeeds.
func TestInventory_cluster_retriesOnConflict(t *testing.T) {
	cluster := backends.SharedCluster(t)
	other := cluster.Client()
	t.Cleanup(func() { other.Close() })
	prefix := "test:" + strings.ReplaceAll(t.Name(), "/", ":") + ":" + rand.Text()[:8] + ":"
	key := rediskeys.Keys{Prefix: prefix}.Stock("sku")
	t.Cleanup(func() { other.Del(context.Background(), key) })

	var writes atomic.Int64
	rdb := cluster.Client()
	t.Cleanup(func() { rdb.Close() })
	rdb.OnNewNode(func(node *redis.Client) {
		node.AddHook(conflictingWrite(t, other, key, &writes))
	})
	checkRetriedOnce(t, New(rdb, WithPrefix(prefix)), &writes)
}
