package main

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/jmoiron/sqlx"
	"github.com/redis/go-redis/v9"

	"github.com/stockguard/stockguard"
	"github.com/stockguard/stockguard/mysqllock"
	"github.com/stockguard/stockguard/redislock"
	"github.com/stockguard/stockguard/tiered"
	"github.com/stockguard/stockguard/watchtx"
)

// strategies are the -strategy values, each built with its package's
// constructor; the backends each needs are opened only when it is chosen.
// orders marks the strategies whose inventory is a stockguard.Orders:
// only those can take a buy under the buyer's order ID exactly once, and
// the service refuses to start with any other (the counterexample aside,
// and only when asked for by -allow-oversell).
var strategies = map[string]struct {
	mysql, redis, orders bool
	build                func(db *sqlx.DB, rdb *redis.Client, cfg config) (stockguard.Inventory, error)
}{
	"mysql-atomic": {mysql: true, orders: true, build: func(db *sqlx.DB, _ *redis.Client, cfg config) (stockguard.Inventory, error) {
		return mysqllock.NewAtomic(db, mysqllock.WithTable(cfg.table))
	}},
	"mysql-batched": {mysql: true, orders: true, build: func(db *sqlx.DB, _ *redis.Client, cfg config) (stockguard.Inventory, error) {
		return mysqllock.NewBatched(db, mysqllock.WithTable(cfg.table))
	}},
	"mysql-pessimistic": {mysql: true, build: func(db *sqlx.DB, _ *redis.Client, cfg config) (stockguard.Inventory, error) {
		return mysqllock.NewPessimistic(db, mysqllock.WithTable(cfg.table))
	}},
	"mysql-optimistic": {mysql: true, build: func(db *sqlx.DB, _ *redis.Client, cfg config) (stockguard.Inventory, error) {
		return mysqllock.NewOptimistic(db, mysqllock.WithTable(cfg.table))
	}},
	"redis-atomic": {redis: true, orders: true, build: func(_ *sqlx.DB, rdb *redis.Client, cfg config) (stockguard.Inventory, error) {
		return redislock.NewAtomic(rdb, redislock.WithPrefix(cfg.prefix))
	}},
	"redis-batched": {redis: true, orders: true, build: func(_ *sqlx.DB, rdb *redis.Client, cfg config) (stockguard.Inventory, error) {
		return redislock.NewBatched(rdb, redislock.WithPrefix(cfg.prefix))
	}},
	"redis-guarded": {redis: true, build: func(_ *sqlx.DB, rdb *redis.Client, cfg config) (stockguard.Inventory, error) {
		return redislock.NewGuarded(rdb, redislock.WithPrefix(cfg.prefix))
	}},
	"redis-watchtx": {redis: true, build: func(_ *sqlx.DB, rdb *redis.Client, cfg config) (stockguard.Inventory, error) {
		return watchtx.New(rdb, watchtx.WithPrefix(cfg.prefix))
	}},
	// Redis answers, a consumer writes each order to MySQL: see consumer.go.
	"tiered-mysql": {mysql: true, orders: true, redis: true, build: func(db *sqlx.DB, rdb *redis.Client, cfg config) (stockguard.Inventory, error) {
		back, err := mysqllock.NewBatched(db, mysqllock.WithTable(cfg.table))
		if err != nil {
			return nil, err
		}
		return tiered.New(rdb, back, tiered.WithPrefix(cfg.prefix))
	}},
	"mutex-counterexample": {redis: true, build: func(_ *sqlx.DB, rdb *redis.Client, cfg config) (stockguard.Inventory, error) {
		return newMutexCounterexample(rdb, cfg.prefix), nil
	}},
}

// orderStrategies lists the strategies the service runs on.
func orderStrategies() string {
	var names []string
	for name, spec := range strategies {
		if spec.orders {
			names = append(names, name)
		}
	}
	slices.Sort(names)
	return strings.Join(names, "|")
}

// createSchema makes sure the MySQL tables exist before the first request.
func createSchema(ctx context.Context, db *sqlx.DB, table string) error {
	if err := mysqllock.CreateSchema(ctx, db, mysqllock.WithTable(table)); err != nil {
		return fmt.Errorf("create schema: %w", err)
	}
	return nil
}
