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

// A checkout: hold a cart while the buyer pays, confirm it, take it back
// when the order is cancelled. Every call is under the order's number, so
// a call whose reply was lost is simply made again. (Needs a Redis server,
// so it is compiled but not run.)
func ExampleAtomic_Hold() {
	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{Addr: "localhost:6379"})
	defer rdb.Close()
	shop, err := redislock.NewAtomic(rdb, redislock.WithPrefix("shop:"))
	if err != nil {
		log.Fatal(err)
	}
	for _, sku := range []string{"mug", "tea"} {
		if err := shop.SetStock(ctx, sku, 100); err != nil {
			log.Fatal(err)
		}
	}
	cart := []stockguard.Line{{SKU: "mug", Qty: 2}, {SKU: "tea", Qty: 5}}

	// retry repeats a call while its outcome is unknown: under the same
	// order ID, it then takes effect exactly once.
	retry := func(call func() error) error {
		for {
			err := call()
			if !errors.Is(err, stockguard.ErrOutcomeUnknown) {
				return err
			}
			time.Sleep(50 * time.Millisecond)
		}
	}

	// Both lines or neither, for 15 minutes by Redis's clock.
	err = retry(func() error { return shop.Hold(ctx, "order-1001", 15*time.Minute, cart...) })
	switch {
	case errors.Is(err, stockguard.ErrInsufficientStock):
		fmt.Println("sold out")
		return
	case err != nil:
		log.Fatal(err)
	}

	// Paid: taken for good. Had the 15 minutes passed, the units would be
	// back on sale already, and Confirm would say ErrOrderClosed.
	if err := retry(func() error { return shop.Confirm(ctx, "order-1001") }); err != nil {
		log.Fatal(err)
	}

	// Cancelled: the units go back, once, however often this is called.
	if err := retry(func() error { return shop.Return(ctx, "order-1001") }); err != nil {
		log.Fatal(err)
	}
	info, err := shop.Order(ctx, "order-1001")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(info.State, info.Lines)
}
