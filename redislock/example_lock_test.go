package redislock_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stockguard/stockguard"
	"github.com/stockguard/stockguard/redislock"
)

// Obtain, work, Release. The fencing token goes with every write to the
// guarded resource, which must refuse tokens older than the newest it has
// seen. (Needs a Redis server, so it is compiled but not run.)
func ExampleClient_Obtain() {
	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{Addr: "localhost:6379"})
	defer rdb.Close()
	locks, err := redislock.New(rdb)
	if err != nil {
		log.Fatal(err)
	}

	lock, err := locks.Obtain(ctx, "report:2024-06", 10*time.Second)
	switch {
	case errors.Is(err, redislock.ErrNotObtained):
		fmt.Println("someone else is on it")
		return
	case err != nil:
		log.Fatal(err) // Redis failed
	}
	defer lock.Release(ctx)

	fmt.Println("writing with fencing token", lock.Token())
}

// Wait up to five seconds for a busy lock, woken by its release rather
// than polling; the one-second backoff is only the fallback for a lost
// announcement.
func ExampleNotify() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	rdb := redis.NewClient(&redis.Options{Addr: "localhost:6379"})
	defer rdb.Close()

	locker, err := redislock.New(rdb)
	if err != nil {
		log.Fatal(err)
	}
	lock, err := locker.Obtain(ctx, "nightly-job", 30*time.Second,
		redislock.Notify()) // wait for the release, until ctx ends
	if err != nil {
		// ErrNotObtained joined with context.DeadlineExceeded, or Redis's error.
		log.Fatal(err)
	}
	defer lock.Release(context.Background())
}

// A watchdog renews a short lease for as long as the job runs; the job
// runs under the lock's Context, which ends the moment a renewal finds the
// lock gone. MaxHold stops a runaway job from holding it forever.
func ExampleWatchdog() {
	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{Addr: "localhost:6379"})
	defer rdb.Close()

	locker, err := redislock.New(rdb)
	if err != nil {
		log.Fatal(err)
	}
	lock, err := locker.Obtain(ctx, "reindex", 5*time.Second,
		redislock.Watchdog(), redislock.MaxHold(time.Hour))
	if err != nil {
		log.Fatal(err)
	}
	defer lock.Release(ctx) // stops the watchdog; no renewal after it returns

	reindex := func(ctx context.Context) error {
		select {
		case <-ctx.Done():
			return context.Cause(ctx) // wraps redislock.ErrNotHeld when lost
		case <-time.After(time.Minute):
			return nil
		}
	}
	if err := reindex(lock.Context()); errors.Is(err, redislock.ErrNotHeld) {
		fmt.Println("lost the lock, stopped:", err)
	}
}

// An Owner passed down explicitly can take a lock it already holds; the
// lock goes when every hold is released.
func ExampleReentrant() {
	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{Addr: "localhost:6379"})
	defer rdb.Close()
	locks, err := redislock.New(rdb)
	if err != nil {
		log.Fatal(err)
	}
	me := redislock.NewOwner()

	outer, err := locks.Obtain(ctx, "account:7", 10*time.Second, redislock.Reentrant(me))
	if err != nil {
		log.Fatal(err)
	}
	defer outer.Release(ctx)

	inner, err := locks.Obtain(ctx, "account:7", 10*time.Second, redislock.Reentrant(me))
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(inner.Token() == outer.Token()) // nested holds share the token
	inner.Release(ctx)                          // still held by outer
}

// A lock-guarded inventory whose stock lives in Redis; pass
// WithStore(mysqllock.NewFencedStore(db)) to keep it in MySQL instead.
func ExampleNewGuarded() {
	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{Addr: "localhost:6379"})
	defer rdb.Close()

	inv, err := redislock.NewGuarded(rdb, redislock.WithPrefix("shop:"),
		redislock.WithLockTTL(time.Second),
		redislock.WithRetry(stockguard.RetryPolicy{MaxAttempts: 20}))
	if err != nil {
		log.Fatal(err)
	}
	if err := inv.SetStock(ctx, "sku-42", 100); err != nil {
		log.Fatal(err)
	}
	switch err := inv.Decrement(ctx, "sku-42", 2); {
	case err == nil:
		fmt.Println("sold 2")
	case errors.Is(err, stockguard.ErrContention):
		fmt.Println("too busy, nothing taken; try again")
	case errors.Is(err, stockguard.ErrOutcomeUnknown):
		fmt.Println("the write's reply was lost; reconcile:", err)
	default:
		fmt.Println("not sold:", err)
	}
}
