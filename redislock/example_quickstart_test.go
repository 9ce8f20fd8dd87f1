package redislock_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stockguard/stockguard"
	"github.com/stockguard/stockguard/redislock"
)

// A complete program on Redis: an order taken twice, its units once.
func Example() {
	ctx := context.Background()
	// REDIS_ADDR: e.g. "127.0.0.1:6379"
	rdb := redis.NewClient(&redis.Options{Addr: os.Getenv("REDIS_ADDR"), DialTimeout: 5 * time.Second})
	defer rdb.Close()
	dial, cancel := context.WithTimeout(ctx, 5*time.Second) // a server that never answers fails here
	defer cancel()
	if err := rdb.Ping(dial).Err(); err != nil {
		log.Fatal(err)
	}
	shop, err := redislock.NewAtomic(rdb, redislock.WithPrefix("shop:")) // processes sharing a prefix share the stock
	if err != nil {
		log.Fatal(err)
	}
	if err := shop.SetStock(ctx, "sku-42", 10); err != nil {
		log.Fatal(err)
	}

	// Your order number; here one unique to the run: Redis keeps an ID for 7 days
	// but SetStock resets the level: a fixed ID would take nothing on a rerun.
	order := fmt.Sprintf("order-%d", time.Now().UnixNano())
	for range 2 { // the same order ID twice: the units are taken once
		switch err := shop.Take(ctx, order, stockguard.Line{SKU: "sku-42", Qty: 3}); {
		case err == nil:
			fmt.Println("order taken")
		case errors.Is(err, stockguard.ErrInsufficientStock):
			fmt.Println("sold out; nothing taken")
		case errors.Is(err, stockguard.ErrOutcomeUnknown):
			fmt.Println("reply lost: repeat the Take with the same ID")
		default: // ErrUnknownSKU, ErrOrderMismatch, ErrContention, ErrUnavailable, ...: nothing taken
			log.Fatal(err)
		}
	}
	left, err := shop.Stock(ctx, "sku-42")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("left:", left)
	// It prints:
	//
	//	order taken
	//	order taken
	//	left: 7
}
