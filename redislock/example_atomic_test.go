package redislock_test

import (
	"context"
	"errors"
	"fmt"
	"log"

	"github.com/redis/go-redis/v9"
	"github.com/stockguard/stockguard"
	"github.com/stockguard/stockguard/redislock"
)

// NewAtomic takes any go-redis client; give several app processes the same
// prefix and they share the stock. (Needs a Redis server, so it is compiled
// but not run.)
func ExampleNewAtomic() {
	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{Addr: "localhost:6379"})
	defer rdb.Close()

	inv, err := redislock.NewAtomic(rdb, redislock.WithPrefix("shop:"))
	if err != nil {
		log.Fatal(err)
	}
	if err := inv.SetStock(ctx, "sku-42", 100); err != nil {
		log.Fatal(err)
	}

	switch err := inv.Decrement(ctx, "sku-42", 3); {
	case err == nil:
		fmt.Println("sold 3")
	case errors.Is(err, stockguard.ErrInsufficientStock):
		fmt.Println("sold out")
	case errors.Is(err, stockguard.ErrOutcomeUnknown):
		// The script reached Redis but its reply did not come back: the
		// units may be gone. Do not retry blindly; reconcile the order.
		fmt.Println("check this order later:", err)
	default:
		// Nothing was taken: unknown SKU, bad request, context ended,
		// Redis unreachable or refusing.
		fmt.Println("not sold:", err)
	}
}

// A stock key that holds something stockguard did not write is reported,
// not guessed at, and left alone until SetStock overwrites it.
func ExampleAtomic_Decrement_corruptStock() {
	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{Addr: "localhost:6379"})
	defer rdb.Close()
	rdb.Set(ctx, "stock:{sku-7}", "lots", 0)

	inv, err := redislock.NewAtomic(rdb)
	if err != nil {
		log.Fatal(err)
	}
	err = inv.Decrement(ctx, "sku-7", 1)
	fmt.Println(errors.Is(err, stockguard.ErrUnknownSKU), errors.Is(err, stockguard.ErrCorruptStock))
}
