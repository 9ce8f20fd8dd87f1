package redislock

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"

	"github.com/redis/go-redis/v9"
	"github.com/stockguard/stockguard"
	"github.com/stockguard/stockguard/internal/redisx"
)

// evictionCheck remembers that an Atomic's servers were found to evict no
// keys, or could not be asked (see admitOrder).
type evictionCheck struct{ passed atomic.Bool }

// admitOrder is admit for the Orders methods, which also need servers that
// never evict a key: a record or line record evicted reads as "nothing
// recorded" or "give the units back". The first call asks
// every server (each shard's master and replicas on a cluster) for its
// maxmemory settings; maxmemory 0 or maxmemory-policy noeviction pass, and
// so does a server that refuses CONFIG (renamed, ACL): the deployment is
// then the operator's to keep. Any other setting fails the call with an
// error wrapping stockguard.ErrUnavailable, nothing sent, and is asked
// again by the next call.
func (a *Atomic) admitOrder(ctx context.Context, verr error) error {
	if err := a.admit(ctx, verr); err != nil || a.evictions.passed.Load() {
		return err
	}
	ask := func(ctx context.Context, c redis.Cmdable) error {
		cfg, err := c.ConfigGet(ctx, "maxmemory*").Result()
		var reply redis.Error
		switch {
		case errors.As(err, &reply):
			return nil // CONFIG refused: nothing to check with
		case err != nil:
			return redisx.Classify(ctx, err, redisx.Read)
		}
		if maxmem, policy := cfg["maxmemory"], cfg["maxmemory-policy"]; maxmem != "0" && maxmem != "" && policy != "noeviction" {
			return fmt.Errorf("%w: redislock: a server has maxmemory %s with maxmemory-policy %s, which may evict order and line records: Orders need noeviction (or maxmemory 0), nothing sent",
				stockguard.ErrUnavailable, maxmem, policy)
		}
		return nil
	}
	var err error
	switch c := a.rdb.(type) {
	case *redis.ClusterClient:
		err = c.ForEachShard(ctx, func(ctx context.Context, n *redis.Client) error { return ask(ctx, n) })
	case redis.Cmdable:
		err = ask(ctx, c)
	}
	if err != nil {
		return err
	}
	a.evictions.passed.Store(true)
	return nil
}
