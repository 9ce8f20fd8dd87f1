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
		node.AddHook(afterGet{key: key, fn: func(ctx context.Context) {
			if writes.CompareAndSwap(0, 1) {
				if err := other.DecrBy(ctx, key, 1).Err(); err != nil {
					t.Errorf("the conflicting write: %v", err)
				}
			}
		}})
	})

	inv := New(rdb, WithPrefix(prefix))
	ctx := t.Context()
	if err := inv.SetStock(ctx, "sku", 10); err != nil {
		t.Fatal(err)
	}
	if err := inv.Decrement(ctx, "sku", 2); err != nil {
		t.Fatalf("Decrement with one conflict: %v", err)
	}
	if writes.Load() != 1 {
		t.Fatal("the conflicting write did not happen")
	}
	if got := inv.Retries(); got != 1 {
		t.Errorf("Retries = %d, want 1", got)
	}
	if n, err := inv.Stock(ctx, "sku"); n != 7 || err != nil {
		t.Fatalf("Stock = %d, %v; want 7 (10 - 1 by the other client - 2)", n, err)
	}
}
