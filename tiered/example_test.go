package tiered_test

import (
	"context"
	"fmt"
	"log"
	"os"

	"github.com/jmoiron/sqlx"
	"github.com/redis/go-redis/v9"

	"github.com/stockguard/stockguard"
	"github.com/stockguard/stockguard/mysqllock"
	"github.com/stockguard/stockguard/tiered"
)

var (
	mysqlDSN  = os.Getenv("STOCKGUARD_MYSQL_DSN")
	redisAddr = os.Getenv("STOCKGUARD_REDIS_ADDR")
)

// Redis sells, MySQL keeps the ledger: the take and its stream entry are
// one script on Redis, and a consumer applies the order to MySQL under the
// same ID. TestExamples_run runs it on private servers.
func ExampleNew() {
	ctx := context.Background()
	db, err := sqlx.Connect("mysql", mysqlDSN) // e.g. "root@tcp(127.0.0.1:3306)/test"
	if err != nil {
		log.Fatal(err)
	}
	defer db.Close()
	if err := mysqllock.CreateSchema(ctx, db); err != nil {
		log.Fatal(err)
	}
	rdb := redis.NewClient(&redis.Options{Addr: redisAddr}) // e.g. "127.0.0.1:6379"
	defer rdb.Close()

	back, err := mysqllock.NewBatched(db) // the ledger of record
	if err != nil {
		log.Fatal(err)
	}
	shop, err := tiered.New(rdb, back) // what the service calls
	if err != nil {
		log.Fatal(err)
	}
	// Once, when the front is deployed (not at each start): its stream,
	// group and epoch, whose loss tells a restarted, empty front.
	if err := shop.Setup(ctx); err != nil {
		log.Fatal(err)
	}
	// The consumer: here in the service; several, in processes of their
	// own, share the stream (tiered.WithConsumerName).
	run, stop := context.WithCancel(ctx)
	defer stop()
	consumer, err := tiered.NewConsumer(rdb, back)
	if err != nil {
		log.Fatal(err)
	}
	go consumer.Run(run)

	if err := shop.SetStock(ctx, "sku-42", 10); err != nil {
		log.Fatal(err)
	}
	// Answered at Redis speed; retried under the same ID, it takes once.
	if err := shop.Take(ctx, "order-1", stockguard.Line{SKU: "sku-42", Qty: 3}); err != nil {
		log.Fatal(err)
	}
	left, err := shop.Stock(ctx, "sku-42")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("left:", left)

	// Wait until the consumer has applied every entry, then ask the ledger.
	queue := tiered.NewStreams(rdb, tiered.StreamKey(tiered.DefaultPrefix), tiered.DefaultGroup)
	if err := tiered.Drain(ctx, queue); err != nil {
		log.Fatal(err)
	}
	info, err := back.Order(ctx, "order-1")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("in MySQL:", info.State, info.Lines)
}
