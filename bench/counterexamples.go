package bench

import (
	"github.com/jmoiron/sqlx"
	"github.com/redis/go-redis/v9"

	"github.com/stockguard/stockguard"
	"github.com/stockguard/stockguard/internal/counterexample"
)

// counterexamples are the seeds' broken patterns (package
// internal/counterexample documents how each breaks). They run only when
// asked for, and every report labels them.
var counterexamples = []Target{
	broken(RedisTarget("broken-redis-check-then-act", "GET, check, SET the computed level: no lock at all",
		func(rdb redis.UniversalClient, prefix string) (stockguard.Inventory, error) {
			return counterexample.NewCheckThenAct(rdb, prefix), nil
		})),
	broken(RedisTarget("broken-redis-setnx-expire", "SETNX then a separate EXPIRE; waiters delete TTL-less \"orphan\" locks",
		func(rdb redis.UniversalClient, prefix string) (stockguard.Inventory, error) {
			return counterexample.NewSetNXExpire(rdb, prefix), nil
		})),
	broken(RedisTarget("broken-redis-del-unlock", "SET NX PX lock released by DEL without an owner check",
		func(rdb redis.UniversalClient, prefix string) (stockguard.Inventory, error) {
			return counterexample.NewDelUnlock(rdb, prefix), nil
		})),
	broken(RedisTarget("broken-redis-getset-lock", "seed 000's SETNX + GETSET timestamp lock",
		func(rdb redis.UniversalClient, prefix string) (stockguard.Inventory, error) {
			return counterexample.NewGetSetLock(rdb, prefix), nil
		})),
	broken(MySQLTarget("broken-local-mutex", "in-process mutex around SELECT/UPDATE: one lock per app instance",
		func(db *sqlx.DB, table string) (stockguard.Inventory, error) {
			return counterexample.NewLocalMutex(db, table)
		})),
	broken(MySQLTarget("broken-mysql-repeatable-read", "REPEATABLE READ transaction: snapshot SELECT, UPDATE to the computed level",
		func(db *sqlx.DB, table string) (stockguard.Inventory, error) {
			return counterexample.NewRepeatableRead(db, table)
		})),
}

func broken(t Target) Target {
	t.Counterexample = true
	return t
}
