package redistest

import (
	"context"
	"crypto/rand"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stockguard/stockguard"
)

// Prefix returns a key prefix unique to t, and deletes its keys when t
// ends, on every master of a cluster.
func Prefix(t testing.TB, rdb redis.UniversalClient) string {
	t.Helper()
	prefix := "test:" + strings.ReplaceAll(t.Name(), "/", ":") + ":" + rand.Text()[:8] + ":"
	t.Cleanup(func() {
		ctx := context.Background()
		keys, _ := keys(ctx, rdb, prefix)
		for _, k := range keys { // one by one: a cluster refuses a DEL across slots
			rdb.Del(ctx, k)
		}
	})
	return prefix
}

// Keys returns every key under prefix, on every master of a cluster.
func Keys(ctx context.Context, t testing.TB, rdb redis.UniversalClient, prefix string) []string {
	t.Helper()
	found, err := keys(ctx, rdb, prefix)
	if err != nil {
		t.Fatal(err)
	}
	return found
}

func keys(ctx context.Context, rdb redis.UniversalClient, prefix string) ([]string, error) {
	cc, ok := rdb.(*redis.ClusterClient)
	if !ok {
		return rdb.Keys(ctx, prefix+"*").Result()
	}
	var (
		mu    sync.Mutex
		found []string
	)
	err := cc.ForEachMaster(ctx, func(ctx context.Context, c *redis.Client) error {
		k, err := c.Keys(ctx, prefix+"*").Result()
		mu.Lock()
		found = append(found, k...)
		mu.Unlock()
		return err
	})
	return found, err
}

// Corrupt is a stock key content stockguard never writes.
type Corrupt struct {
	Name, Value string
	Hash        bool // a hash instead of the string Value
}

// CorruptValues are the corrupt stock key contents the strategies' tests
// try.
var CorruptValues = []Corrupt{
	{Name: "text", Value: "abc"},
	{Name: "empty", Value: ""},
	{Name: "float", Value: "1.5"},
	{Name: "negative", Value: "-3"},
	{Name: "leading zero", Value: "007"},
	{Name: "exponent", Value: "1e3"},
	{Name: "space", Value: " 7"},
	{Name: "above MaxQty", Value: "9007199254740992"},
	{Name: "huge", Value: "99999999999999999999999"},
	{Name: "hash", Hash: true},
}

// Set writes c into key.
func (c Corrupt) Set(ctx context.Context, rdb redis.UniversalClient, key string) error {
	if c.Hash {
		return rdb.HSet(ctx, key, "qty", 5).Err()
	}
	return rdb.Set(ctx, key, c.Value, 0).Err()
}

// HotSKU stocks a fresh SKU with stockguard.MaxQty units, so that it cannot
// run out during a benchmark, and returns its name.
func HotSKU(b testing.TB, inv stockguard.Inventory) string {
	b.Helper()
	sku := "hot-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	if err := inv.SetStock(b.Context(), sku, stockguard.MaxQty); err != nil {
		b.Fatal(err)
	}
	return sku
}

// DecrementN takes 1 unit n times from sku with workers goroutines and
// returns the wall time. An error is reported to b and stops its worker.
func DecrementN(b testing.TB, inv stockguard.Decrementer, sku string, workers, n int) time.Duration {
	var next atomic.Int64
	var wg sync.WaitGroup
	ctx := context.Background()
	start := time.Now()
	for range workers {
		wg.Go(func() {
			for next.Add(1) <= int64(n) {
				if err := inv.Decrement(ctx, sku, 1); err != nil {
					b.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	return time.Since(start)
}
