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

// On a Redis Cluster, Segmented spreads one hot SKU over 16 slots — and so
// over the masters. Buyers of more units than any segment holds are served
// across segments, so the SKU is sold out only when it really is. (Needs a
// cluster, so it is compiled but not run.)
func ExampleNewSegmented() {
	ctx := context.Background()
	rdb := redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{"redis-1:6379", "redis-2:6379", "redis-3:6379"}})
	defer rdb.Close()

	inv, err := redislock.NewSegmented(rdb, redislock.WithPrefix("shop:"), redislock.WithSegments(16))
	if err != nil {
		log.Fatal(err)
	}
	if err := inv.SetStock(ctx, "flash-sale-tv", 1000); err != nil {
		log.Fatal(err)
	}
	switch err := inv.Decrement(ctx, "flash-sale-tv", 2); {
	case err == nil:
		fmt.Println("sold 2")
	case errors.Is(err, stockguard.ErrInsufficientStock):
		fmt.Println("sold out")
	case errors.Is(err, stockguard.ErrOutcomeUnknown):
		fmt.Println("reconcile: the sale may have happened")
	default:
		fmt.Println("try again later:", err)
	}
}

// The classic design, lock a segment and then take from it — for
// comparison: it costs two more round trips per sale.
func ExampleWithSegmentLocks() {
	rdb := redis.NewClient(&redis.Options{Addr: "localhost:6379"})
	defer rdb.Close()
	inv, err := redislock.NewSegmented(rdb, redislock.WithSegmentLocks())
	if err != nil {
		log.Fatal(err)
	}
	_ = inv.Decrement(context.Background(), "flash-sale-tv", 1)
}
