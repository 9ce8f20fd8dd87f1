package watchtx_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stockguard/stockguard"
	"github.com/stockguard/stockguard/watchtx"
)

// Every request in flight holds one connection while its key is WATCHed:
// size the pool for the concurrency. (Needs a Redis server, so it is
// compiled but not run.)
func ExampleNew() {
	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{Addr: "localhost:6379", PoolSize: 128})
	defer rdb.Close()

	inv, err := watchtx.New(rdb, watchtx.WithPrefix("shop:"))
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
	case errors.Is(err, stockguard.ErrContention):
		// Too many buyers at once: every attempt lost the race. Nothing
		// was taken; the caller may try again later.
		fmt.Println("busy, try again")
	case errors.Is(err, stockguard.ErrOutcomeUnknown):
		fmt.Println("check this order later:", err)
	default:
		fmt.Println("not sold:", err)
	}
	fmt.Println("retries so far:", inv.Retries())
}

// WithRetry replaces DefaultRetry(); here fewer attempts, for callers that
// would rather fail fast than wait under contention.
func ExampleWithRetry() {
	rdb := redis.NewClient(&redis.Options{Addr: "localhost:6379"})
	defer rdb.Close()

	inv, err := watchtx.New(rdb, watchtx.WithRetry(stockguard.RetryPolicy{
		MaxAttempts: 3,
		BaseDelay:   time.Millisecond,
		MaxDelay:    10 * time.Millisecond,
		Adaptive:    true,
	}))
	if err != nil {
		log.Fatal(err)
	}
	_ = inv
}
