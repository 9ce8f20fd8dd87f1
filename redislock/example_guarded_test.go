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
