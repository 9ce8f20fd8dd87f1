package replicatargets

import (
	"github.com/redis/go-redis/v9"

	"github.com/stockguard/stockguard"
	"github.com/stockguard/stockguard/bench"
	"github.com/stockguard/stockguard/bench/redistargets"
	"github.com/stockguard/stockguard/redislock"
	"github.com/stockguard/stockguard/watchtx"
)

// strategy is one Redis strategy, built on the "redis" backend; init
// renames it onto each deployment with replicas.
type strategy struct {
	name   string
	target func() bench.Target
}

// strategies are the Redis strategies that keep their stock on one
// deployment (redis-redlock locks on independent masters, a topology of
// its own).
var strategies = []strategy{
	{"atomic", func() bench.Target {
		return redistargets.Target("atomic", "one Lua script: exists? enough? DECRBY",
			func(rdb redis.UniversalClient, prefix string) (stockguard.Inventory, error) {
				return redislock.NewAtomic(rdb, redislock.WithPrefix(prefix)), nil
			})
	}},
	{"batched", func() bench.Target {
		return redistargets.Target("batched", "concurrent requests for a SKU combined into one Lua call",
			func(rdb redis.UniversalClient, prefix string) (stockguard.Inventory, error) {
				return redislock.NewBatched(rdb, redislock.WithPrefix(prefix)), nil
			})
	}},
	{"watchtx", func() bench.Target {
		return redistargets.Target("watchtx", "WATCH, GET, MULTI/DECRBY/EXEC, retry on conflict",
			func(rdb redis.UniversalClient, prefix string) (stockguard.Inventory, error) {
				return watchtx.New(rdb, watchtx.WithPrefix(prefix)), nil
			})
	}},
	{"guarded", func() bench.Target {
		return redistargets.Target("guarded", "owner-token lock with a fence counter, read, check, fenced write, release",
			func(rdb redis.UniversalClient, prefix string) (stockguard.Inventory, error) {
				return redislock.NewGuarded(rdb, redislock.WithPrefix(prefix)), nil
			})
	}},
	{"segmented", func() bench.Target {
		return redistargets.SegmentedTarget("segmented", "stock split over 8 keys; Lua take from a random one",
			func(rdb redis.UniversalClient, prefix string) *redislock.Segmented {
				return redislock.NewSegmented(rdb, redislock.WithPrefix(prefix))
			})
	}},
}
