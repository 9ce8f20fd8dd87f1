package peers

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"

	"github.com/redis/go-redis/v9"

	"github.com/stockguard/stockguard"
	"github.com/stockguard/stockguard/bench"
	"github.com/stockguard/stockguard/bench/redistargets"
	"github.com/stockguard/stockguard/redislock"
	"github.com/stockguard/stockguard/strategy"
)

// The peers as harness targets: a decrement guarded by each peer's lock,
// next to redislock's own strategies (redis-guarded is the same pattern
// with redislock's lock and a fenced write). None of the peers issues
// fencing tokens, so the write is a plain SET: a holder paused past its
// lease can overwrite a newer holder's write — the gap redis-guarded
// closes.
func init() {
	bench.Register(redistargets.Target("peer-bsm-redislock", "bsm/redislock lock (SET NX PX script), read, check, plain write, release",
		func(rdb redis.UniversalClient, prefix string) (stockguard.Inventory, error) {
			return NewLocked(BSM(rdb, prefix), rdb, prefix), nil
		}))
	bench.Register(redistargets.Target("peer-redsync", "redsync lock (SET NX PX) on the one master, read, check, plain write, release",
		func(rdb redis.UniversalClient, prefix string) (stockguard.Inventory, error) {
			return NewLocked(Redsync([]redis.UniversalClient{rdb}, prefix), rdb, prefix), nil
		}))
	bench.Register(redistargets.Target("peer-rueidislock", "rueidislock lock (one key, client-side-caching wake-ups) on its own rueidis client, read, check, plain write, release",
		func(rdb redis.UniversalClient, prefix string) (stockguard.Inventory, error) {
			c, ok := rdb.(*redis.Client)
			if !ok {
				return nil, fmt.Errorf("peers: rueidislock needs the address of a single Redis, have a %T", rdb)
			}
			p, err := Rueidislock(c.Options().Addr, prefix)
			if err != nil {
				return nil, err
			}
			return NewLocked(p, rdb, prefix), nil
		}))
}

// Locked is an Inventory whose decrements run under a peer's lock on the
// SKU: obtain (one attempt), read, check, write, release; a busy lock is
// retried under stockguard's default retry policy. The stock lives where
// redislock's strategies keep it ("<prefix>stock:{sku}", a
// redislock.RedisStore), so the harness audits it the same way.
type Locked struct {
	peer    Peer
	store   *redislock.RedisStore
	retrier *strategy.Retrier
	closed  atomic.Bool
}

var (
	_ stockguard.Inventory  = (*Locked)(nil)
	_ strategy.RetryCounter = (*Locked)(nil)
)

// NewLocked returns a Locked inventory over p, with the stock on rdb under
// prefix.
func NewLocked(p Peer, rdb redis.UniversalClient, prefix string) *Locked {
	return &Locked{peer: p, store: mustBuild(redislock.NewRedisStore(rdb, redislock.WithPrefix(prefix))), retrier: strategy.NewRetrier(strategy.RetryPolicy{})}
}

// Decrement takes qty units of sku, all or none, under the peer's lock on
// sku. Its errors wrap stockguard.ErrInvalidRequest (before any I/O), the
// context's error, ErrUnknownSKU, ErrInsufficientStock, ErrContention (the
// lock stayed busy, or the peer or a read failed) or ErrOutcomeUnknown.
func (l *Locked) Decrement(ctx context.Context, sku string, qty int64) error {
	if err := strategy.Validate(sku, qty); err != nil {
		return err
	}
	return l.locked(ctx, sku, func(ctx context.Context) error {
		level, err := l.store.Stock(ctx, sku)
		if err != nil {
			return err
		}
		if level < qty {
			return fmt.Errorf("%w: %q has %d, %d wanted", stockguard.ErrInsufficientStock, sku, level, qty)
		}
		return l.store.SetStock(ctx, sku, level-qty)
	})
}

// SetStock creates sku with qty units or overwrites its level, under the
// peer's lock on sku; errors as Decrement's.
func (l *Locked) SetStock(ctx context.Context, sku string, qty int64) error {
	if err := strategy.ValidateSet(sku, qty); err != nil {
		return err
	}
	return l.locked(ctx, sku, func(ctx context.Context) error { return l.store.SetStock(ctx, sku, qty) })
}

// Stock reads sku's level; a single read needs no lock.
func (l *Locked) Stock(ctx context.Context, sku string) (int64, error) {
	return l.store.Stock(ctx, sku)
}

// locked runs fn holding the peer's lock on sku, retrying a busy lock.
func (l *Locked) locked(ctx context.Context, sku string, fn func(ctx context.Context) error) error {
	if err := strategy.Canceled(ctx); err != nil {
		return err
	}
	return l.retrier.Do(ctx, func(ctx context.Context) error {
		release, err := l.peer.Obtain(ctx, "lock:"+sku, false)
		switch {
		case errors.Is(err, ErrBusy):
			return strategy.Retry(err)
		case err != nil:
			if cerr := strategy.Canceled(ctx); cerr != nil {
				return cerr
			}
			return fmt.Errorf("%w: %s: %v", stockguard.ErrContention, l.peer.Name, err)
		}
		defer func() {
			// The outcome is decided; a failed release leaves the lock to
			// expire.
			rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), TTL)
			_ = release(rctx)
			cancel()
		}()
		return fn(ctx)
	})
}

// Retries returns the lock acquisitions retried so far.
func (l *Locked) Retries() int64 { return l.retrier.Retries() }

// Close closes the peer's own client, once.
func (l *Locked) Close() error {
	if l.closed.Swap(true) {
		return nil
	}
	return l.peer.Close()
}
