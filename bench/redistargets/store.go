package redistargets

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/redis/go-redis/v9"

	"github.com/stockguard/stockguard"
	"github.com/stockguard/stockguard/bench"
	"github.com/stockguard/stockguard/internal/rediskeys"
	"github.com/stockguard/stockguard/redislock"
)

// NewInventory builds one app instance of a strategy using key prefix
// prefix.
type NewInventory func(rdb redis.UniversalClient, prefix string) (stockguard.Inventory, error)

// Target returns a target whose store is the keys under a prefix derived
// from the run's namespace ("<ns>:"), deleted afterwards; the audit GETs
// the stock key (rediskeys' "<prefix>stock:{sku}", the layout of
// redislock's and watchtx's single-key strategies) itself.
func Target(name, about string, newInv NewInventory) bench.Target {
	return withAttach(bench.Target{
		Name: name, About: about, Needs: []string{Name},
		Open: func(ctx context.Context, s bench.Servers, ns string) (*bench.Store, error) {
			rdb, err := bench.Conn[redis.UniversalClient](s, Name)
			if err != nil {
				return nil, err
			}
			return store(rdb, ns, rawStock(rdb, ns+":"), func() (stockguard.Inventory, error) { return newInv(rdb, ns+":") }), nil
		},
	})
}

// SegmentedTarget is Target for a redislock.Segmented, whose stock lives in
// segment keys: the audit reads them through Segmented.RawStock, which
// knows their layout and bypasses the strategy.
func SegmentedTarget(name, about string, newSeg func(rdb redis.UniversalClient, prefix string) (*redislock.Segmented, error)) bench.Target {
	return withAttach(bench.Target{
		Name: name, About: about, Needs: []string{Name},
		Open: func(ctx context.Context, s bench.Servers, ns string) (*bench.Store, error) {
			rdb, err := bench.Conn[redis.UniversalClient](s, Name)
			if err != nil {
				return nil, err
			}
			prefix := ns + ":"
			seg, err := newSeg(rdb, prefix)
			if err != nil {
				return nil, err
			}
			return store(rdb, ns, seg.RawStock, func() (stockguard.Inventory, error) { return newSeg(rdb, prefix) }), nil
		},
	})
}

// RedlockTarget is Target for a strategy locking through Redlock: it gets
// the "redis" client (where the stock lives, read back by the audit)
// followed by the "redlock" voters, RedlockVoters servers in all.
func RedlockTarget(name, about string, newInv func(masters []redis.UniversalClient, prefix string) (stockguard.Inventory, error)) bench.Target {
	return withAttach(bench.Target{
		Name: name, About: about, Needs: []string{Name, RedlockName},
		Open: func(ctx context.Context, s bench.Servers, ns string) (*bench.Store, error) {
			rdb, err := bench.Conn[redis.UniversalClient](s, Name)
			if err != nil {
				return nil, err
			}
			voters, err := bench.Conn[[]redis.UniversalClient](s, RedlockName)
			if err != nil {
				return nil, err
			}
			if len(voters) < RedlockVoters-1 {
				return nil, fmt.Errorf("%w: %s needs %d redlock voters, has %d", bench.ErrMissingBackend, name, RedlockVoters-1, len(voters))
			}
			masters := append([]redis.UniversalClient{rdb}, voters[:RedlockVoters-1]...)
			prefix := ns + ":"
			st := store(rdb, ns, rawStock(rdb, prefix), func() (stockguard.Inventory, error) { return newInv(masters, prefix) })
			stockClose := st.Close
			st.Close = func(ctx context.Context) error {
				errs := []error{stockClose(ctx)}
				for _, m := range masters[1:] {
					errs = append(errs, deletePrefix(ctx, m, prefix))
				}
				return errors.Join(errs...)
			}
			return st, nil
		},
	})
}

// withAttach gives t an Attach: Open creates nothing on the servers (the
// keys appear as the stock is set), so another process reaches the store
// through the same Open, minus the Close that would delete its keys.
func withAttach(t bench.Target) bench.Target {
	open := t.Open
	t.Attach = func(ctx context.Context, s bench.Servers, ns string) (*bench.Store, error) {
		st, err := open(ctx, s, ns)
		if err != nil {
			return nil, err
		}
		st.Close = nil
		return st, nil
	}
	return t
}

// store lays a target's store under the key prefix "<ns>:".
func store(rdb redis.UniversalClient, ns string, raw func(context.Context, string) (int64, error), newInv func() (stockguard.Inventory, error)) *bench.Store {
	return &bench.Store{
		New:   newInv,
		Raw:   raw,
		Close: func(ctx context.Context) error { return deletePrefix(ctx, rdb, ns+":") },
	}
}

// rawStock reads a SKU's stock key under prefix; a missing key is
// ErrUnknownSKU.
func rawStock(rdb redis.UniversalClient, prefix string) func(context.Context, string) (int64, error) {
	keys := rediskeys.Keys{Prefix: prefix}
	return func(ctx context.Context, sku string) (int64, error) {
		key := keys.Stock(sku)
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
