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
	locks, err := redislock.NewRedlock(masters, redislock.WithNodeTimeout(20*time.Millisecond))
	if err != nil {
		log.Fatal(err)
	}

	// Retry with random delays, so that contenders stop splitting the votes.
	lock, err := locks.Obtain(ctx, "rebuild-search-index", 30*time.Second,
		redislock.ObtainRetry(stockguard.RetryPolicy{MaxAttempts: 6, BaseDelay: 10 * time.Millisecond, MaxDelay: 200 * time.Millisecond}))
	if errors.Is(err, redislock.ErrNotObtained) {
		fmt.Println("busy, or too many masters down:", err)
		return
	}
	defer func() {
		if err := lock.Release(ctx); errors.Is(err, redislock.ErrExpired) {
			log.Print("the work outlived the lock's validity; another holder may have overlapped")
		}
	}()
	fmt.Println("held until", lock.ValidUntil())
}

// A lock-guarded inventory whose SKU locks are Redlocks over three masters
// and whose stock lives on the first; its writes are guarded by the lock's
// owner on that master (see NewRedlockGuarded for what that protects).
// (Needs Redis servers, so it is compiled but not run.)
func ExampleNewRedlockGuarded() {
	ctx := context.Background()
	var masters []redis.UniversalClient
	for _, addr := range []string{"redis-a:6379", "redis-b:6379", "redis-c:6379"} {
		c := redis.NewClient(&redis.Options{Addr: addr})
		defer c.Close()
		masters = append(masters, c)
	}
	inv, err := redislock.NewRedlockGuarded(masters, redislock.WithPrefix("shop:"),
		redislock.WithStockMaster(0), redislock.WithNodeTimeout(20*time.Millisecond))
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
		fmt.Println("busy, or too many masters down; nothing taken:", err)
	case errors.Is(err, stockguard.ErrOutcomeUnknown):
		fmt.Println("the write's reply was lost; reconcile:", err)
	default:
		fmt.Println("not sold:", err)
	}
}
