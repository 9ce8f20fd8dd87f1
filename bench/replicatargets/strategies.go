package replicatargets

import (
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/stockguard/stockguard"
	"github.com/stockguard/stockguard/bench"
	"github.com/stockguard/stockguard/bench/redistargets"
	"github.com/stockguard/stockguard/redislock"
	"github.com/stockguard/stockguard/watchtx"
)

// AckTimeout is how long an -ack target's write waits for its replica
// (WithReplicaAck(1, AckTimeout)): a quarter of a buyer's deadline, so
// that a write the replica does not confirm ends ErrOutcomeUnknown well
// before its caller gives up.
const AckTimeout = 250 * time.Millisecond

// strategy is one Redis strategy, built on the "redis" backend with or
// without a replica's acknowledgement; init renames it onto each
// deployment with replicas.
type strategy struct {
	name   string
	target func(ack bool) bench.Target
}

// strategies are the Redis strategies that keep their stock on one
// deployment (redis-redlock locks on independent masters, a topology of
// its own).
var strategies = []strategy{
	{"atomic", func(ack bool) bench.Target {
		return bench.OrdersTarget(redistargets.Target("atomic", "one Lua script: exists? enough? DECRBY"+ackAbout(ack),
			func(rdb redis.UniversalClient, prefix string) (stockguard.Inventory, error) {
				return redislock.NewAtomic(rdb, redislockOptions(ack, prefix)...)
			}))
	}},
	{"batched", func(ack bool) bench.Target {
		return bench.OrdersTarget(redistargets.Target("batched", "concurrent requests for a SKU, and orders for a slot, combined into one Lua call"+ackAbout(ack),
			func(rdb redis.UniversalClient, prefix string) (stockguard.Inventory, error) {
				return redislock.NewBatched(rdb, redislockOptions(ack, prefix)...)
			}))
	}},
	{"watchtx", func(ack bool) bench.Target {
		return redistargets.Target("watchtx", "WATCH, GET, MULTI/DECRBY/EXEC, retry on conflict"+ackAbout(ack),
			func(rdb redis.UniversalClient, prefix string) (stockguard.Inventory, error) {
				opts := []watchtx.Option{watchtx.WithPrefix(prefix)}
				if ack {
					opts = append(opts, watchtx.WithReplicaAck(1, AckTimeout))
				}
				return watchtx.New(rdb, opts...)
			})
	}},
	{"guarded", func(ack bool) bench.Target {
		return redistargets.Target("guarded", "owner-token lock with a fence counter, read, check, fenced write, release"+ackAbout(ack),
			func(rdb redis.UniversalClient, prefix string) (stockguard.Inventory, error) {
				return redislock.NewGuarded(rdb, redislockOptions(ack, prefix)...)
			})
	}},
	{"segmented", func(ack bool) bench.Target {
		return redistargets.SegmentedTarget("segmented", "stock split over 8 keys; Lua take from a random one"+ackAbout(ack),
			func(rdb redis.UniversalClient, prefix string) (*redislock.Segmented, error) {
				return redislock.NewSegmented(rdb, redislockOptions(ack, prefix)...)
			})
	}},
}

func ackAbout(ack bool) string {
	if ack {
		return "; each write acknowledged once a replica has it (WithReplicaAck(1, 250ms))"
	}
	return "; each write acknowledged once the master applied it"
}

// redislockOptions are a redislock target's options under key prefix
// prefix, with a replica's acknowledgement when ack.
func redislockOptions(ack bool, prefix string) []redislock.Option {
	opts := []redislock.Option{redislock.WithPrefix(prefix)}
	if ack {
		opts = append(opts, redislock.WithReplicaAck(1, AckTimeout))
	}
	return opts
}
