package redistargets

import (
	"sync"

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
			return redislock.NewAtomic(rdb, redislock.WithPrefix(prefix))
		})))
	bench.Register(bench.OrdersTarget(Target("redis-batched", "concurrent requests for a SKU, and orders for a slot, combined into one Lua call that applies them in arrival order",
		func(rdb redis.UniversalClient, prefix string) (stockguard.Inventory, error) {
			return redislock.NewBatched(rdb, redislock.WithPrefix(prefix))
		})))
	bench.Register(Target("redis-watchtx", "WATCH, GET, MULTI/DECRBY/EXEC, retry on conflict",
		func(rdb redis.UniversalClient, prefix string) (stockguard.Inventory, error) {
			return watchtx.New(rdb, watchtx.WithPrefix(prefix))
		}))
	bench.Register(Target("redis-guarded", "owner-token lock (SET NX PX), read, check, fenced write, release",
		func(rdb redis.UniversalClient, prefix string) (stockguard.Inventory, error) {
			return redislock.NewGuarded(rdb, redislock.WithPrefix(prefix))
		}))
	bench.Register(SegmentedTarget("redis-segmented", "stock split over 8 keys (own cluster slots); Lua take from a random one, locked gather across them",
		func(rdb redis.UniversalClient, prefix string) (*redislock.Segmented, error) {
			return redislock.NewSegmented(rdb, redislock.WithPrefix(prefix))
		}))
	bench.Register(RedlockTarget("redis-redlock", "Redlock over 3 independent masters, read, check, owner-guarded write on the stock's master, release",
		func(masters []redis.UniversalClient, prefix string) (stockguard.Inventory, error) {
			return redislock.NewRedlockGuarded(masters, redislock.WithPrefix(prefix))
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

	// Broken wrappers of redis-atomic, each wrong on one path only: the
	// audit must catch each under the default workload (the order ones
	// under the checkout workload).
	atomic := func(rdb redis.UniversalClient, prefix string) (*redislock.Atomic, error) {
		return redislock.NewAtomic(rdb, redislock.WithPrefix(prefix))
	}
	bench.Register(broken(Target("broken-redis-ack-multi", "redis-atomic, but a request of 2 units or more is acknowledged without a write",
		func(rdb redis.UniversalClient, prefix string) (stockguard.Inventory, error) {
			a, err := atomic(rdb, prefix)
			if err != nil {
				return nil, err
			}
			return counterexample.NewAckMulti(a), nil
		})))
	bench.Register(broken(Target("broken-redis-flaky-unknown", "redis-atomic, but 1 call in 100 answers unknown having done nothing and 1 in 1,000 takes twice",
		func(rdb redis.UniversalClient, prefix string) (stockguard.Inventory, error) {
			a, err := atomic(rdb, prefix)
			if err != nil {
				return nil, err
			}
			return counterexample.NewFlakyUnknown(a), nil
		})))
	bench.Register(broken(Target("broken-redis-blind-decrby", "plain DECRBY, no stock check",
		func(rdb redis.UniversalClient, prefix string) (stockguard.Inventory, error) {
			return counterexample.NewBlindDecr(rdb, prefix), nil
		})))
	bench.Register(broken(Target("broken-redis-check-decrby", "GET, check, then DECRBY: two commands",
		func(rdb redis.UniversalClient, prefix string) (stockguard.Inventory, error) {
			return counterexample.NewCheckDecr(rdb, prefix), nil
		})))
	for _, rare := range []struct {
		name, about string
		bug         counterexample.RareBug
	}{
		{"ack-no-write", "acknowledged without a write", counterexample.RareAckNoWrite},
		{"double-write", "taken twice", counterexample.RareDoubleWrite},
		{"false-refusal", "refused as insufficient without looking", counterexample.RareFalseRefusal},
		{"refuse-after-take", "refused as insufficient after taking", counterexample.RareRefuseAfterTake},
	} {
		bench.Register(broken(Target("broken-redis-rare-"+rare.name, "redis-atomic, but 1 call in 10,000 "+rare.about,
			func(rdb redis.UniversalClient, prefix string) (stockguard.Inventory, error) {
				a, err := atomic(rdb, prefix)
				if err != nil {
					return nil, err
				}
				return counterexample.NewRare(a, rare.bug), nil
			})))
	}
	var books sync.Map // key prefix → the instances' shared *counterexample.Book
	book := func(prefix string) *counterexample.Book {
		b, _ := books.LoadOrStore(prefix, new(counterexample.Book))
		return b.(*counterexample.Book)
	}
	bench.Register(checkout(Target("broken-checkout-phantom", "redis-atomic orders, but a refused order's row stays in the application's table: it reads back as taken",
		func(rdb redis.UniversalClient, prefix string) (stockguard.Inventory, error) {
			a, err := atomic(rdb, prefix)
			if err != nil {
				return nil, err
			}
			return counterexample.NewPhantom(a, book(prefix)), nil
		})))
	bench.Register(checkout(Target("broken-checkout-lazy-expiry", "redis-atomic orders, but an expired hold's units come back only when the order is next touched",
		func(rdb redis.UniversalClient, prefix string) (stockguard.Inventory, error) {
			a, err := atomic(rdb, prefix)
			if err != nil {
				return nil, err
			}
			return counterexample.NewLazyExpiry(a, book(prefix)), nil
		})))
	bench.Register(checkout(Target("broken-checkout-flaky-restock", "redis-atomic orders, but restocks answer unknown 8 times before applying and 1 take in 200 is silently put back",
		func(rdb redis.UniversalClient, prefix string) (stockguard.Inventory, error) {
			a, err := atomic(rdb, prefix)
			if err != nil {
				return nil, err
			}
			return counterexample.NewFlakyRestock(a, book(prefix)), nil
		})))
	bench.Register(checkout(Target("broken-checkout-return-expired", "redis-atomic orders, but a Return after a hold's deadline gives its units back again",
		func(rdb redis.UniversalClient, prefix string) (stockguard.Inventory, error) {
			a, err := atomic(rdb, prefix)
			if err != nil {
				return nil, err
			}
			return counterexample.NewReturnExpiredTwice(a), nil
		})))
}

// checkout marks a broken checkout client.
func checkout(t bench.Target) bench.Target {
	t.OrdersOnly = true
	return broken(bench.OrdersTarget(t))
}

func broken(t bench.Target) bench.Target {
	t.Counterexample = true
	return t
}
