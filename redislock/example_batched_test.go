package redislock_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"sync"

	"github.com/redis/go-redis/v9"
	"github.com/stockguard/stockguard"
	"github.com/stockguard/stockguard/redislock"
)

// A flash sale on one hot SKU: one Batched instance per process, shared by
// every buyer goroutine, turns many concurrent purchases into few script
// calls. It shares the stock keys with NewAtomic. (Needs a Redis server, so
// it is compiled but not run.)
func ExampleNewBatched() {
	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{Addr: "localhost:6379"})
	defer rdb.Close()

	inv, err := redislock.NewBatched(rdb, redislock.WithPrefix("shop:"), redislock.WithBatchSize(128))
	if err != nil {
		log.Fatal(err)
	}
	if err := inv.SetStock(ctx, "sku-42", 1000); err != nil {
		log.Fatal(err)
	}
	var wg sync.WaitGroup
	for range 256 {
		wg.Go(func() {
			switch err := inv.Decrement(ctx, "sku-42", 1); {
			case err == nil, errors.Is(err, stockguard.ErrInsufficientStock):
			case errors.Is(err, stockguard.ErrOutcomeUnknown):
				// The call carrying this purchase reached Redis but its
				// reply was lost: the unit may be gone. Reconcile.
			default:
				log.Print(err) // nothing was taken
			}
		})
	}
	wg.Wait()
	s := inv.Stats()
	fmt.Printf("%d purchases in %d script calls\n", s.Requests, s.Batches)
}
