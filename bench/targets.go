package bench

import (
	"github.com/jmoiron/sqlx"
	"github.com/redis/go-redis/v9"

	"github.com/stockguard/stockguard"
	"github.com/stockguard/stockguard/mysqllock"
	"github.com/stockguard/stockguard/redislock"
	"github.com/stockguard/stockguard/watchtx"
)

// registry lists the strategies, in the order reports show them. Each entry
// builds one app instance, with the package's default options, on the run's
// private table or key prefix. Add new strategies at the end.
var registry = []Target{
	MySQLTarget("mysql-atomic", "one conditional UPDATE qty = qty - n WHERE qty >= n",
		func(db *sqlx.DB, table string) (stockguard.Inventory, error) {
			return mysqllock.NewAtomic(db, mysqllock.WithTable(table)), nil
		}),
	MySQLTarget("mysql-pessimistic", "transaction: SELECT … FOR UPDATE, check, UPDATE, COMMIT",
		func(db *sqlx.DB, table string) (stockguard.Inventory, error) {
			return mysqllock.NewPessimistic(db, mysqllock.WithTable(table)), nil
		}),
	MySQLTarget("mysql-optimistic", "read qty+version, UPDATE … WHERE version = ?, retry on conflict",
		func(db *sqlx.DB, table string) (stockguard.Inventory, error) {
			return mysqllock.NewOptimistic(db, mysqllock.WithTable(table)), nil
		}),
	MySQLTarget("mysql-namedlock", "GET_LOCK, read, check, write, RELEASE_LOCK on a pinned connection",
		func(db *sqlx.DB, table string) (stockguard.Inventory, error) {
			return mysqllock.NewNamedLock(db, mysqllock.WithTable(table)), nil
		}),
	RedisTarget("redis-atomic", "one Lua script: exists? enough? DECRBY",
		func(rdb redis.UniversalClient, prefix string) (stockguard.Inventory, error) {
			return redislock.NewAtomic(rdb, redislock.WithPrefix(prefix)), nil
		}),
	RedisTarget("redis-watchtx", "WATCH, GET, MULTI/DECRBY/EXEC, retry on conflict",
		func(rdb redis.UniversalClient, prefix string) (stockguard.Inventory, error) {
			return watchtx.New(rdb, watchtx.WithPrefix(prefix)), nil
		}),
	RedisTarget("redis-guarded", "owner-token lock (SET NX PX), read, check, fenced write, release",
		func(rdb redis.UniversalClient, prefix string) (stockguard.Inventory, error) {
			return redislock.NewGuarded(rdb, redislock.WithPrefix(prefix)), nil
		}),
	SegmentedMySQLTarget("mysql-segmented", "stock split over 8 rows; conditional UPDATE of a random one, locked fallback across them",
		func(db *sqlx.DB, table string) (stockguard.Inventory, error) {
			return mysqllock.NewSegmented(db, mysqllock.WithTable(table)), nil
		}),
	MySQLTarget("mysql-batched", "concurrent requests for a SKU combined into one UPDATE (client-side group commit)",
		func(db *sqlx.DB, table string) (stockguard.Inventory, error) {
			return mysqllock.NewBatched(db, mysqllock.WithTable(table)), nil
		}),
	SegmentedRedisTarget("redis-segmented", "stock split over 8 keys (own cluster slots); Lua take from a random one, locked gather across them",
		func(rdb redis.UniversalClient, prefix string) (stockguard.Inventory, error) {
			return redislock.NewSegmented(rdb, redislock.WithPrefix(prefix)), nil
		}),
	RedlockTarget("redis-redlock", "Redlock over 3 independent masters, read, check, owner-guarded write on the stock's master, release",
		func(masters []redis.UniversalClient, prefix string) (stockguard.Inventory, error) {
			return redislock.NewRedlockGuarded(masters, redislock.WithPrefix(prefix)), nil
		}),
}
