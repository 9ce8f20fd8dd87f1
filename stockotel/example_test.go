package stockotel_test

import (
	"context"
	"fmt"
	"log"

	_ "github.com/go-sql-driver/mysql"
	"github.com/jmoiron/sqlx"
	"github.com/redis/go-redis/v9"

	"github.com/stockguard/stockguard"
	"github.com/stockguard/stockguard/mysqllock"
	"github.com/stockguard/stockguard/redislock"
	"github.com/stockguard/stockguard/stockotel"
)

// Wrap a strategy once at start-up, after the program has installed its
// OpenTelemetry providers (otel.SetMeterProvider, otel.SetTracerProvider)
// or passing them as options. Every call through inv is then a span and
// a count of stockguard.operations by outcome.
func ExampleWrap() {
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:6379"})
	defer rdb.Close()
	atomic, err := redislock.NewAtomic(rdb)
	if err != nil {
		log.Fatal(err)
	}
	inv := stockotel.Wrap(atomic, stockotel.WithStrategy("redis-atomic"))

	if err := inv.Decrement(context.Background(), "sku-1", 1); err != nil {
		// The wrapper returns the strategy's error unchanged; the metrics
		// label it with its contract class.
		fmt.Println(stockotel.Outcome(err))
	}
}

// The outcome attribute is one stable name per contract error.
func ExampleOutcome() {
	err := fmt.Errorf("checkout: %w", stockguard.ErrInsufficientStock)
	fmt.Println(stockotel.Outcome(err), stockotel.Outcome(nil))
	// Output: insufficient_stock ok
}

// An Orders keeps its order methods: wrap it with WrapOrders.
func ExampleWrapOrders() {
	db, err := sqlx.Open("mysql", "root@tcp(127.0.0.1:3306)/test?interpolateParams=true")
	if err != nil {
		log.Fatal(err)
	}
	defer db.Close()
	batched, err := mysqllock.NewBatched(db)
	if err != nil {
		log.Fatal(err)
	}
	wrapped := stockotel.WrapOrders(batched, stockotel.WithStrategy("mysql-batched"))
	if err := wrapped.Take(context.Background(), "order-42", stockguard.Line{SKU: "sku-1", Qty: 2}); err != nil {
		log.Print(err)
	}
}
