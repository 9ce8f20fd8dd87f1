package bench_test

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/redis/go-redis/v9"

	"github.com/stockguard/stockguard"
	"github.com/stockguard/stockguard/bench"
	_ "github.com/stockguard/stockguard/bench/all" // registers the strategies
	"github.com/stockguard/stockguard/internal/memstock"
)

// Run measures and audits any Inventory: here an in-memory one, 10,000
// requests from 8 workers over 2 instances on one hot SKU (the first few of
// each worker on a SKU that sells out, some of them refused).
func ExampleRun() {
	store := memstock.New()
	target := bench.Target{
		Name: "memstock", About: "in-memory reference",
		Open: func(context.Context, bench.Servers, string) (*bench.Store, error) {
			return &bench.Store{New: func() (stockguard.Inventory, error) { return store, nil }}, nil
		},
	}
	w := bench.DefaultWorkload()
	w.Ops, w.Duration, w.Warmup = 10_000, 0, 0
	r, err := bench.Run(context.Background(), target, nil, w)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("attempts:", r.Attempts)
	fmt.Println("acknowledged = gone:", r.Audit.Acked == r.Audit.Gone)
	fmt.Println("sound:", r.Sound())
	// Output:
	// attempts: 10000
	// acknowledged = gone: true
	// sound: true
}

// A registered strategy runs against real servers (here from the
// environment), given under its backends' names; the table is what
// stockbench prints.
func ExampleLookup() {
	db := sqlx.MustOpen("mysql", os.Getenv("STOCKGUARD_MYSQL_DSN"))
	defer db.Close()
	rdb := redis.NewClient(&redis.Options{Addr: os.Getenv("STOCKGUARD_REDIS_ADDR")})
	defer rdb.Close()

	var results []*bench.Result
	for _, name := range []string{"mysql-atomic", "redis-atomic"} {
		t, ok := bench.Lookup(name)
		if !ok {
			continue
		}
		w := bench.DefaultWorkload()
		w.Workers, w.Duration = 64, time.Second
		r, err := bench.Run(context.Background(), t, bench.Servers{"mysql": db, "redis": rdb}, w)
		if err != nil {
			fmt.Println(err)
			return
		}
		results = append(results, r)
	}
	bench.WriteTable(os.Stdout, results)
}
