package lock_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stockguard/stockguard/redislock/lock"
)

// Obtain, work, Release. The fencing token goes with every write to the
// guarded resource, which must refuse tokens older than the newest it has
// seen. (Needs a Redis server, so it is compiled but not run.)
func ExampleClient_Obtain() {
	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{Addr: "localhost:6379"})
	defer rdb.Close()
	locks, err := lock.New(rdb)
	if err != nil {
		log.Fatal(err)
	}

	l, err := locks.Obtain(ctx, "report:2024-06", 10*time.Second)
	switch {
	case errors.Is(err, lock.ErrNotObtained):
		fmt.Println("someone else is on it")
		return
	case err != nil:
		log.Fatal(err) // Redis failed
	}
	defer l.Release(ctx)

	fmt.Println("writing with fencing token", l.Token())
}

// Wait up to five seconds for a busy lock, woken by its release rather
// than polling; the one-second backoff is only the fallback for a lost
// announcement.
func ExampleNotify() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	rdb := redis.NewClient(&redis.Options{Addr: "localhost:6379"})
	defer rdb.Close()

	locker, err := lock.New(rdb)
	if err != nil {
		log.Fatal(err)
	}
	l, err := locker.Obtain(ctx, "nightly-job", 30*time.Second,
		lock.Notify()) // wait for the release, until ctx ends
	if err != nil {
		// ErrNotObtained joined with context.DeadlineExceeded, or Redis's error.
		log.Fatal(err)
	}
	defer l.Release(context.Background())
}

// A watchdog renews a short lease for as long as the job runs; the job
// runs under the lock's Context, which ends the moment a renewal finds the
// lock gone. MaxHold stops a runaway job from holding it forever.
func ExampleWatchdog() {
	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{Addr: "localhost:6379"})
	defer rdb.Close()

	locker, err := lock.New(rdb)
	if err != nil {
		log.Fatal(err)
	}
	l, err := locker.Obtain(ctx, "reindex", 5*time.Second,
		lock.Watchdog(), lock.MaxHold(time.Hour))
	if err != nil {
		log.Fatal(err)
	}
	defer l.Release(ctx) // stops the watchdog; no renewal after it returns

	reindex := func(ctx context.Context) error {
		select {
		case <-ctx.Done():
			return context.Cause(ctx) // wraps lock.ErrNotHeld when lost
		case <-time.After(time.Minute):
			return nil
		}
	}
	if err := reindex(l.Context()); errors.Is(err, lock.ErrNotHeld) {
		fmt.Println("lost the lock, stopped:", err)
	}
}

// An Owner passed down explicitly can take a lock it already holds; the
// lock goes when every hold is released.
func ExampleReentrant() {
	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{Addr: "localhost:6379"})
	defer rdb.Close()
	locks, err := lock.New(rdb)
	if err != nil {
		log.Fatal(err)
	}
	me := lock.NewOwner()

	outer, err := locks.Obtain(ctx, "account:7", 10*time.Second, lock.Reentrant(me))
	if err != nil {
		log.Fatal(err)
	}
	defer outer.Release(ctx)

	inner, err := locks.Obtain(ctx, "account:7", 10*time.Second, lock.Reentrant(me))
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(inner.Token() == outer.Token()) // nested holds share the token
	inner.Release(ctx)                          // still held by outer
}
