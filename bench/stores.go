package bench

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strconv"

	"github.com/jmoiron/sqlx"
	"github.com/redis/go-redis/v9"

	"github.com/stockguard/stockguard"
	"github.com/stockguard/stockguard/internal/rediskeys"
	"github.com/stockguard/stockguard/mysqllock"
)

// MySQLTarget returns a target whose store is a fresh stock table of
// mysqllock's schema, named after the run's namespace, dropped afterwards;
// the audit reads it back with its own SELECT. newInv builds one instance on
// the table.
func MySQLTarget(name, about string, newInv func(db *sqlx.DB, table string) (stockguard.Inventory, error)) Target {
	return mysqlTarget(name, about, stockTable, newInv)
}

// SegmentedMySQLTarget is MySQLTarget for mysqllock.NewSegmented, whose
// stock lives in the segments table beside the stock table; the audit sums
// the SKU's segments itself.
func SegmentedMySQLTarget(name, about string, newInv func(db *sqlx.DB, table string) (stockguard.Inventory, error)) Target {
	return mysqlTarget(name, about, segmentedTables, newInv)
}

// mysqlSchema is how a MySQL target's stock is laid out.
type mysqlSchema struct {
	create func(ctx context.Context, db *sqlx.DB, table string) error
	tables func(table string) []string // to drop afterwards
	raw    func(table string) string   // SELECT of one SKU's stock, NULL or no row when unknown
}

var (
	stockTable = mysqlSchema{
		create: func(ctx context.Context, db *sqlx.DB, table string) error {
			return mysqllock.CreateSchema(ctx, db, mysqllock.WithTable(table))
		},
		tables: func(table string) []string { return []string{table} },
		raw:    func(table string) string { return "SELECT qty FROM `" + table + "` WHERE sku = ?" },
	}
	segmentedTables = mysqlSchema{
		create: func(ctx context.Context, db *sqlx.DB, table string) error {
			if err := mysqllock.CreateSchema(ctx, db, mysqllock.WithTable(table)); err != nil {
				return err
			}
			return mysqllock.CreateSegmentedSchema(ctx, db, mysqllock.WithTable(table))
		},
		tables: func(table string) []string { return []string{table, mysqllock.SegmentsTable(table)} },
		raw: func(table string) string {
			return "SELECT SUM(qty) FROM `" + mysqllock.SegmentsTable(table) + "` WHERE sku = ?"
		},
	}
)

func mysqlTarget(name, about string, schema mysqlSchema, newInv func(db *sqlx.DB, table string) (stockguard.Inventory, error)) Target {
	return Target{
		Name: name, About: about, Needs: NeedMySQL,
		Open: func(ctx context.Context, b Backends, ns string) (*Store, error) {
			table := "stockbench_" + ns
			if err := schema.create(ctx, b.DB, table); err != nil {
				return nil, err
			}
			raw := schema.raw(table)
			return &Store{
				New: func() (stockguard.Inventory, error) { return newInv(b.DB, table) },
				Raw: func(ctx context.Context, sku string) (int64, error) { return rawRow(ctx, b.DB, raw, sku) },
				Close: func(ctx context.Context) error {
					var errs []error
					for _, t := range schema.tables(table) {
						_, err := b.DB.ExecContext(ctx, "DROP TABLE IF EXISTS `"+t+"`")
						errs = append(errs, err)
					}
					return errors.Join(errs...)
				},
			}, nil
		},
	}
}

// rawRow reads one integer with query(sku); a missing row is ErrUnknownSKU.
func rawRow(ctx context.Context, db *sqlx.DB, query, sku string) (int64, error) {
	var v sql.NullInt64
	err := db.QueryRowxContext(ctx, query, sku).Scan(&v)
	if errors.Is(err, sql.ErrNoRows) || (err == nil && !v.Valid) {
		return 0, fmt.Errorf("%w: no row for %q", stockguard.ErrUnknownSKU, sku)
	}
	return v.Int64, err
}

// RedisTarget returns a target whose store is the keys under a prefix
// derived from the run's namespace ("<ns>:"), deleted afterwards; the audit
// GETs the stock key (rediskeys' "<prefix>stock:{sku}") itself. newInv
// builds one instance using that prefix.
func RedisTarget(name, about string, newInv func(rdb redis.UniversalClient, prefix string) (stockguard.Inventory, error)) Target {
	return redisTarget(name, about, rawStock, newInv)
}

// SegmentedRedisTarget is RedisTarget for redislock.NewSegmented, whose
// stock lives in segment keys: the audit reads the segment count from the
// SKU's meta hash ("<prefix>segmeta:{sku}", field n) and sums the segments
// ("<prefix>segstock:{sku#i}") itself.
func SegmentedRedisTarget(name, about string, newInv func(rdb redis.UniversalClient, prefix string) (stockguard.Inventory, error)) Target {
	return redisTarget(name, about, rawSegments, newInv)
}

// RedlockTarget is RedisTarget for a strategy locking through Redlock: it
// gets Backends.Redis (where the stock lives, read back by the audit)
// followed by Backends.RedlockMasters, RedlockVoters servers in all.
func RedlockTarget(name, about string, newInv func(masters []redis.UniversalClient, prefix string) (stockguard.Inventory, error)) Target {
	return Target{
		Name: name, About: about, Needs: NeedRedis | NeedRedlock,
		Open: func(ctx context.Context, b Backends, ns string) (*Store, error) {
			masters := append([]redis.UniversalClient{b.Redis}, b.RedlockMasters[:RedlockVoters-1]...)
			s := openRedisStore(b, ns, rawStock,
				func(redis.UniversalClient, string) (stockguard.Inventory, error) { return newInv(masters, ns+":") })
			stockClose := s.Close
			s.Close = func(ctx context.Context) error {
				errs := []error{stockClose(ctx)}
				for _, m := range masters[1:] {
					errs = append(errs, deletePrefix(ctx, m, ns+":"))
				}
				return errors.Join(errs...)
			}
			return s, nil
		},
	}
}

func redisTarget(name, about string, raw func(ctx context.Context, rdb redis.UniversalClient, keys rediskeys.Keys, sku string) (int64, error),
	newInv func(rdb redis.UniversalClient, prefix string) (stockguard.Inventory, error)) Target {
	return Target{
		Name: name, About: about, Needs: NeedRedis,
		Open: func(ctx context.Context, b Backends, ns string) (*Store, error) {
			return openRedisStore(b, ns, raw, newInv), nil
		},
	}
}

// openRedisStore lays a target's store under the key prefix "<ns>:".
func openRedisStore(b Backends, ns string, raw func(ctx context.Context, rdb redis.UniversalClient, keys rediskeys.Keys, sku string) (int64, error),
	newInv func(rdb redis.UniversalClient, prefix string) (stockguard.Inventory, error)) *Store {
	prefix := ns + ":"
	keys := rediskeys.Keys{Prefix: prefix}
	return &Store{
		New:   func() (stockguard.Inventory, error) { return newInv(b.Redis, prefix) },
		Raw:   func(ctx context.Context, sku string) (int64, error) { return raw(ctx, b.Redis, keys, sku) },
		Close: func(ctx context.Context) error { return deletePrefix(ctx, b.Redis, prefix) },
	}
}

// rawStock reads the SKU's stock key.
func rawStock(ctx context.Context, rdb redis.UniversalClient, keys rediskeys.Keys, sku string) (int64, error) {
	return rawGet(ctx, rdb, keys.Stock(sku))
}

func rawSegments(ctx context.Context, rdb redis.UniversalClient, keys rediskeys.Keys, sku string) (int64, error) {
	meta := keys.Name("segmeta", sku)
	n, err := rdb.HGet(ctx, meta, "n").Int()
	if errors.Is(err, redis.Nil) {
		return 0, fmt.Errorf("%w: no segment count in %q", stockguard.ErrUnknownSKU, meta)
	}
	if err != nil {
		return 0, err
	}
	var total int64
	for i := range n {
		v, err := rawGet(ctx, rdb, keys.Name("segstock", sku+"#"+strconv.Itoa(i)))
		if err != nil {
			return 0, err
		}
		total += v
	}
	return total, nil
}

// rawGet reads an integer key; a missing key is ErrUnknownSKU.
func rawGet(ctx context.Context, rdb redis.UniversalClient, key string) (int64, error) {
	s, err := rdb.Get(ctx, key).Result()
	if errors.Is(err, redis.Nil) {
		return 0, fmt.Errorf("%w: no key %q", stockguard.ErrUnknownSKU, key)
	}
	if err != nil {
		return 0, err
	}
	v, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("key %q holds %q, not an integer", key, s)
	}
	return v, nil
}

// deletePrefix removes every key starting with prefix (which holds no
// pattern characters), on every master of a cluster.
func deletePrefix(ctx context.Context, rdb redis.UniversalClient, prefix string) error {
	del := func(ctx context.Context, c redis.UniversalClient) error {
		iter := c.Scan(ctx, 0, prefix+"*", 1000).Iterator()
		pipe := c.Pipeline() // single-key UNLINKs: a cluster node refuses multi-key commands across slots
		for iter.Next(ctx) {
			pipe.Unlink(ctx, iter.Val())
			if pipe.Len() >= 1000 {
				if _, err := pipe.Exec(ctx); err != nil {
					return err
				}
			}
		}
		if err := iter.Err(); err != nil {
			return err
		}
		_, err := pipe.Exec(ctx)
		return err
	}
	if cc, ok := rdb.(*redis.ClusterClient); ok {
		return cc.ForEachMaster(ctx, func(ctx context.Context, c *redis.Client) error { return del(ctx, c) })
	}
	return del(ctx, rdb)
}
