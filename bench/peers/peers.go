package peers

import (
	"context"
	"errors"
	"fmt"
	"time"

	bsm "github.com/bsm/redislock"
	"github.com/go-redsync/redsync/v4"
	rsredis "github.com/go-redsync/redsync/v4/redis"
	"github.com/go-redsync/redsync/v4/redis/goredis/v9"
	"github.com/redis/go-redis/v9"
	"github.com/redis/rueidis"
	"github.com/redis/rueidis/rueidislock"

	"github.com/stockguard/stockguard/redislock/lock"
)

// TTL is the lease every peer's locks get: far longer than a cycle, so no
// lock expires while it is held.
const TTL = 5 * time.Second

// ErrBusy is returned by a Peer's Obtain when the lock is held by someone
// else and the peer gave up.
var ErrBusy = errors.New("peers: lock held by someone else")

// Release gives back a lock a Peer obtained.
type Release func(ctx context.Context) error

// Peer is one lock library behind the one operation the measurements need.
type Peer struct {
	// Name identifies the peer in reports.
	Name string
	// Obtain takes the lock on key for TTL. With wait it waits for a held
	// lock the way the library recommends (and until ctx ends); without,
	// it tries once. A held lock is an error wrapping ErrBusy.
	Obtain func(ctx context.Context, key string, wait bool) (Release, error)
	// Close frees what the peer holds (a client of its own).
	Close func() error
}

// Stockguard is lock.Client: fenced locks (the default), waiting with
// Notify (one pub/sub connection per Client, release announcements).
func Stockguard(rdb lock.RedisClient, prefix string) Peer {
	c := mustBuild(lock.New(rdb, lock.WithPrefix(prefix)))
	return Peer{
		Name: "stockguard",
		Obtain: func(ctx context.Context, key string, wait bool) (Release, error) {
			var opts []lock.ObtainOption
			if wait {
				opts = append(opts, lock.Notify())
			}
			return stockguardObtain(ctx, c, key, opts)
		},
		Close: func() error { return nil },
	}
}

// StockguardPolling is lock.Client waiting by polling every
// millisecond instead of Notify, as bsm/redislock does here: the
// difference to Stockguard is what notification buys.
func StockguardPolling(rdb lock.RedisClient, prefix string) Peer {
	c := mustBuild(lock.New(rdb, lock.WithPrefix(prefix)))
	return Peer{
		Name: "stockguard-poll",
		Obtain: func(ctx context.Context, key string, wait bool) (Release, error) {
			var opts []lock.ObtainOption
			if wait {
				//lint:ignore SA1019 a fixed 1ms poll, like the peers' it is measured against (a RetryPolicy jitters)
				opts = append(opts, lock.ObtainRetry(lock.LinearBackoff(time.Millisecond)))
			}
			return stockguardObtain(ctx, c, key, opts)
		},
		Close: func() error { return nil },
	}
}

func stockguardObtain(ctx context.Context, c *lock.Client, key string, opts []lock.ObtainOption) (Release, error) {
	l, err := c.Obtain(ctx, key, TTL, opts...)
	if errors.Is(err, lock.ErrNotObtained) {
		return nil, fmt.Errorf("%w: %w", ErrBusy, err)
	}
	if err != nil {
		return nil, err
	}
	return l.Release, nil
}

// BSM is bsm/redislock: a SET NX PX script, waiting by polling every
// millisecond (LinearBackoff(1ms), its closest to notified waiting).
func BSM(rdb redis.UniversalClient, prefix string) Peer {
	c := bsm.New(rdb)
	return Peer{
		Name: "bsm/redislock",
		Obtain: func(ctx context.Context, key string, wait bool) (Release, error) {
			var opt *bsm.Options
			if wait {
				opt = &bsm.Options{RetryStrategy: bsm.LinearBackoff(time.Millisecond)}
			}
			l, err := c.Obtain(ctx, prefix+key, TTL, opt)
			if errors.Is(err, bsm.ErrNotObtained) || wait && errors.Is(err, context.DeadlineExceeded) {
				return nil, fmt.Errorf("%w: %w", ErrBusy, err)
			}
			if err != nil {
				return nil, err
			}
			return l.Release, nil
		},
		Close: func() error { return nil },
	}
}

// Redsync is go-redsync/redsync over masters (one for a single-instance
// lock): SET NX PX per master, waiting with its default retries (32 tries,
// 50–250 ms apart).
func Redsync(masters []redis.UniversalClient, prefix string) Peer {
	pools := make([]rsredis.Pool, len(masters))
	for i, m := range masters {
		pools[i] = goredis.NewPool(m)
	}
	rs := redsync.New(pools...)
	name := "redsync"
	if len(masters) > 1 {
		name = fmt.Sprintf("redsync/%d", len(masters))
	}
	return Peer{
		Name: name,
		Obtain: func(ctx context.Context, key string, wait bool) (Release, error) {
			opts := []redsync.Option{redsync.WithExpiry(TTL)}
			if !wait {
				opts = append(opts, redsync.WithTries(1))
			}
			m := rs.NewMutex(prefix+key, opts...)
			err := m.LockContext(ctx)
			// Whatever made it fail — the lock taken, or masters not answering
			// within its per-try timeout (a twentieth of the expiry) — redsync
			// gave up without the lock.
			if err != nil && !errors.Is(err, context.Canceled) {
				return nil, fmt.Errorf("%w: %w", ErrBusy, err)
			}
			if err != nil {
				return nil, err
			}
			return func(ctx context.Context) error {
				ok, err := m.UnlockContext(ctx)
				if err == nil && !ok {
					err = errors.New("redsync: unlock failed")
				}
				return err
			}, nil
		},
		Close: func() error { return nil },
	}
}

// Rueidislock is rueidis's rueidislock with one key per lock
// (KeyMajority 1, as its docs advise for a single Redis), on a rueidis
// client of its own to addr; it waits by client-side-caching
// invalidations. NoLoopTracking needs Redis ≥ 7.0.5. TryNextAfter, the
// timeout of one key's SET before it tries the next, is raised from its
// 20ms to a second: with one key there is no next one, and at 64
// goroutines on 2 CPUs a 20ms SET timed out.
func Rueidislock(addr, prefix string) (Peer, error) {
	l, err := rueidislock.NewLocker(rueidislock.LockerOption{
		ClientOption:   rueidis.ClientOption{InitAddress: []string{addr}},
		KeyPrefix:      prefix + "rueidislock",
		KeyValidity:    TTL,
		KeyMajority:    1,
		TryNextAfter:   time.Second,
		NoLoopTracking: true,
	})
	if err != nil {
		return Peer{}, fmt.Errorf("rueidislock at %s: %w", addr, err)
	}
	return Peer{
		Name: "rueidislock",
		Obtain: func(ctx context.Context, key string, wait bool) (Release, error) {
			obtain := l.TryWithContext
			if wait {
				obtain = l.WithContext
			}
			_, cancel, err := obtain(ctx, key)
			if errors.Is(err, rueidislock.ErrNotLocked) || wait && ctx.Err() != nil {
				return nil, fmt.Errorf("%w: %w", ErrBusy, err)
			}
			if err != nil {
				return nil, err
			}
			return func(context.Context) error { cancel(); return nil }, nil
		},
		Close: func() error { l.Close(); return nil },
	}, nil
}

// RedlockNodeTimeout is the per-master timeout of Redlock: redsync's at
// TTL (its timeout factor, 0.05, times the expiry), so that both wait as
// long for a slow master. (package lock's default, 50ms, is for short leases.)
const RedlockNodeTimeout = TTL / 20

// Redlock is lock.Redlock over masters; it never waits (a Redlock
// takes no Notify), so wait retries every millisecond.
func Redlock(masters []redis.UniversalClient, prefix string) Peer {
	r := mustBuild(lock.NewRedlock(masters, lock.WithPrefix(prefix), lock.WithNodeTimeout(RedlockNodeTimeout)))
	return Peer{
		Name: fmt.Sprintf("stockguard-redlock/%d", len(masters)),
		Obtain: func(ctx context.Context, key string, wait bool) (Release, error) {
			var opts []lock.ObtainOption
			if wait {
				//lint:ignore SA1019 a fixed 1ms poll, like the peers' it is measured against (a RetryPolicy jitters)
				opts = append(opts, lock.ObtainRetry(lock.LinearBackoff(time.Millisecond)))
			}
			l, err := r.Obtain(ctx, key, TTL, opts...)
			if errors.Is(err, lock.ErrNotObtained) {
				return nil, fmt.Errorf("%w: %w", ErrBusy, err)
			}
			if err != nil {
				return nil, err
			}
			return l.Release, nil
		},
		Close: func() error { return nil },
	}
}

// mustBuild returns v, or panics with err: the peers' options are fixed here
// and their prefixes are the harness's, so a constructor that refuses them
// is a bug in this package, not a condition to report.
func mustBuild[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}
