package lock_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stockguard/stockguard"
	"github.com/stockguard/stockguard/redislock/lock"
)

// A Redlock over five independent masters keeps working while two of them
// are down. Check Valid (or ValidUntil) before work that must not overlap
// another holder's; a Redlock has no fencing token, so a resource that must
// refuse late writers needs the single-master lock's Token instead. (Needs
// Redis servers, so it is compiled but not run.)
func ExampleRedlock_Obtain() {
	ctx := context.Background()
	var masters []redis.UniversalClient
	for _, addr := range []string{"redis-a:6379", "redis-b:6379", "redis-c:6379", "redis-d:6379", "redis-e:6379"} {
		c := redis.NewClient(&redis.Options{Addr: addr})
		defer c.Close()
		masters = append(masters, c)
	}
	locks, err := lock.NewRedlock(masters, lock.WithNodeTimeout(20*time.Millisecond))
	if err != nil {
		log.Fatal(err)
	}

	// Retry with random delays, so that contenders stop splitting the votes.
	l, err := locks.Obtain(ctx, "rebuild-search-index", 30*time.Second,
		lock.ObtainRetry(stockguard.RetryPolicy{MaxAttempts: 6, BaseDelay: 10 * time.Millisecond, MaxDelay: 200 * time.Millisecond}))
	if errors.Is(err, lock.ErrNotObtained) {
		fmt.Println("busy, or too many masters down:", err)
		return
	}
	defer func() {
		if err := l.Release(ctx); errors.Is(err, lock.ErrExpired) {
			log.Print("the work outlived the lock's validity; another holder may have overlapped")
		}
	}()
	fmt.Println("held until", l.ValidUntil())
}
