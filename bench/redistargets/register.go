package redistargets

import (
	"github.com/redis/go-redis/v9"

	"github.com/stockguard/stockguard"
	"github.com/stockguard/stockguard/bench"
	"github.com/stockguard/stockguard/internal/counterexample"
	"github.com/stockguard/stockguard/redislock"
	"github.com/stockguard/stockguard/watchtx"
)

// The targets on Redis, in the order reports show them. Each builds one app
// instance, with the package's default options, on the run's private key
// prefix. A new strategy on Redis is one more Register call here.
func init() {
	bench.RegisterBackend(Backend)
	bench.RegisterBackend(RedlockBackend)

	bench.Register(bench.OrdersTarget(Target("redis-atomic", "one Lua script: exists? enough? DECRBY",
		func(rdb redis.UniversalClient, prefix string) (stockguard.Inventory, error) {
			return redislock.NewAtomic(rdb, redislock.WithPrefix(prefix)), nil
		})))
	bench.Register(Target("redis-batched", "concurrent requests for a SKU combined into one Lua call that grants them in arrival order",
		func(rdb redis.UniversalClient, prefix string) (stockguard.Inventory, error) {
			return redislock.NewBatched(rdb, redislock.WithPrefix(prefix)), nil
		}))
	bench.Register(Target("redis-watchtx", "WATCH, GET, MULTI/DECRBY/EXEC, retry on conflict",
		func(rdb redis.UniversalClient, prefix string) (stockguard.Inventory, error) {
			return watchtx.New(rdb, watchtx.WithPrefix(prefix)), nil
		}))
	bench.Register(Target("redis-guarded", "owner-token lock (SET NX PX), read, check, fenced write, release",
		func(rdb redis.UniversalClient, prefix string) (stockguard.Inventory, error) {
			return redislock.NewGuarded(rdb, redislock.WithPrefix(prefix)), nil
		}))
	bench.Register(SegmentedTarget("redis-segmented", "stock split over 8 keys (own cluster slots); Lua take from a random one, locked gather across them",
		func(rdb redis.UniversalClient, prefix string) *redislock.Segmented {
			return redislock.NewSegmented(rdb, redislock.WithPrefix(prefix))
		}))
	bench.Register(RedlockTarget("redis-redlock", "Redlock over 3 independent masters, read, check, owner-guarded write on the stock's master, release",
		func(masters []redis.UniversalClient, prefix string) (stockguard.Inventory, error) {
			return redislock.NewRedlockGuarded(masters, redislock.WithPrefix(prefix)), nil
		}))

	// Known-broken patterns (package internal/counterexample says how each
	// breaks): they run only when asked for, and every report labels them.
	// Each forces its race, so that every run catches it.
	bench.Register(broken(Target("broken-redis-check-then-act", "GET, check, SET the computed level: no lock at all",
		func(rdb redis.UniversalClient, prefix string) (stockguard.Inventory, error) {
			c := counterexample.NewCheckThenAct(rdb, prefix)
			c.ForceOverlap()
			return c, nil
		})))
	bench.Register(broken(Target("broken-redis-setnx-expire", "SETNX then a separate EXPIRE; waiters delete TTL-less \"orphan\" locks",
		func(rdb redis.UniversalClient, prefix string) (stockguard.Inventory, error) {
			c := counterexample.NewSetNXExpire(rdb, prefix)
			c.ForceOverlap()
			return c, nil
		})))
	bench.Register(broken(Target("broken-redis-del-unlock", "SET NX PX lock released by DEL without an owner check",
		func(rdb redis.UniversalClient, prefix string) (stockguard.Inventory, error) {
			c := counterexample.NewDelUnlock(rdb, prefix)
			c.ForceOverlap()
			return c, nil
		})))
	bench.Register(broken(Target("broken-redis-getset-lock", "SETNX lock holding an expiry time, taken over with GETSET once it looks expired",
		func(rdb redis.UniversalClient, prefix string) (stockguard.Inventory, error) {
			c := counterexample.NewGetSetLock(rdb, prefix)
			c.ForceOverlap()
			return c, nil
		})))
}

func broken(t bench.Target) bench.Target {
	t.Counterexample = true
	return t
}
