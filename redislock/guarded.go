package redislock

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/stockguard/stockguard"
	"github.com/stockguard/stockguard/internal/errtext"
	"github.com/stockguard/stockguard/internal/redisx"
	"github.com/stockguard/stockguard/redislock/lock"
	"github.com/stockguard/stockguard/strategy"
)

// DefaultLockTTL is the lease of a Guarded inventory's SKU lock, and of
// a Segmented inventory's gather and segment locks, unless WithLockTTL
// says otherwise: far above the milliseconds a decrement holds it, short
// enough that a crashed holder blocks its SKU only briefly. A holder that
// outlives it is fenced off by the store, not trusted.
const DefaultLockTTL = 2 * time.Second

// Guarded is an Inventory that serialises the writers of a SKU with a Redis
// lock — "lock, read, check, write, unlock", done right:
//
//   - the lock is "<prefix>lock:{sku}", taken with SET NX PX and a random
//     owner token (lock.Client.Obtain), so it expires if its holder dies and
//     only its holder can release it;
//   - the write is fenced (Store.WriteFenced with the lock's fencing token):
//     a holder whose lease ran out while it was paused, and whose SKU was
//     locked by someone else meanwhile, is refused by the store instead of
//     overwriting the newer holder's write;
//   - a lock held by someone else is retried under WithRetry's policy and
//     given up as stockguard.ErrContention;
//   - a SKU that was never stocked leaves nothing behind: with the stock in
//     Redis, the lock is taken only if the stock key exists, checked in the
//     script that takes it (lock.IfExists); with a store of its own (WithStore),
//     Decrement reads the SKU before it locks it. Either way an unknown SKU
//     gets no lock and no fencing counter.
//
// NewRedlockGuarded takes the lock as a Redlock over several masters
// instead, and guards the write by the lock's owner token rather than a
// fencing token; see there for what that does and does not protect.
//
// The lock costs two extra round trips per request and serialises all
// writers of a SKU across processes; NewAtomic is much faster on Redis
// stock. Guarded is for stock that lives elsewhere (WithStore), or to
// compare. Guarded is safe for concurrent use.
type Guarded struct {
	locks   locker
	store   Store // reads and SetStock; writes go through the lock
	ttl     time.Duration
	retrier *strategy.Retrier
}

var (
	_ stockguard.Inventory  = (*Guarded)(nil)
	_ strategy.RetryCounter = (*Guarded)(nil)
)

// NewGuarded returns a Guarded inventory locking on rdb. It reads the
// options WithPrefix, WithRetry, WithLockTTL, WithStore, WithReplicaAck
// and WithAOFAck (for the lock and the default RedisStore); by default the
// stock lives in Redis, in the keys NewAtomic uses (RedisStore).
func NewGuarded(rdb lock.RedisClient, opts ...Option) (*Guarded, error) {
	o := newOptions(opts)
	o.only("NewGuarded", readsGuarded)
	if o.err != nil {
		return nil, o.err
	}
	c, err := lock.New(rdb, o.lockOptions()...)
	if err != nil {
		return nil, err
	}
	locks := fencedLocks{c: c, store: o.store}
	if o.store == nil {
		rs := newRedisStore(rdb, o)
		locks.store, locks.stockKey = rs, rs.levels.Keys.Stock
	}
	return newGuarded(locks, locks.store, o), nil
}

func newGuarded(locks locker, store Store, o options) *Guarded {
	return &Guarded{locks: locks, store: store, ttl: o.lockTTL, retrier: strategy.NewRetrier(o.retry)}
}

// locker is how a Guarded takes a SKU's lock: a single-master lock whose
// writes are fenced (NewGuarded), or a Redlock whose writes are guarded by
// owner (NewRedlockGuarded).
type locker interface {
	// obtain takes sku's lock for ttl, in one attempt; known says that sku
	// must exist already (Decrement), so that an unknown one gets nothing
	// created for it. A lock held by someone else is an error wrapping
	// ErrNotObtained; other errors are contract errors (ErrUnknownSKU, the
	// context's) or Redis's.
	obtain(ctx context.Context, sku string, ttl time.Duration, known bool) (hold, error)
}

// hold is a SKU lock held for one request.
type hold interface {
	// valid reports whether the lock is still held by this process's clock.
	valid() bool
	// write sets sku's stock to level (both valid) unless the store can
	// tell that the lock was lost: then it writes nothing and returns an
	// error wrapping stockguard.ErrContention and not ErrOutcomeUnknown.
	write(ctx context.Context, sku string, level int64) error
	// release gives the lock back; a failure leaves it to expire.
	release(ctx context.Context)
}

// fencedLocks are NewGuarded's locks: Client locks, whose fencing tokens
// the store checks.
type fencedLocks struct {
	c        *lock.Client
	store    Store
	stockKey func(sku string) string // the stock's key in c's Redis; nil for a store elsewhere
}

func (f fencedLocks) obtain(ctx context.Context, sku string, ttl time.Duration, known bool) (hold, error) {
	var opts []lock.ObtainOption
	switch {
	case !known:
		// SetStock creates the SKU: its counter is there to stay.
	case f.stockKey != nil:
		opts = append(opts, lock.IfExists(f.stockKey(sku)))
	default:
		// No script can look into a store outside Redis: read first, so
		// that a SKU the store does not know gets no fencing counter.
		if _, err := f.store.Stock(ctx, sku); err != nil {
			return nil, readFailed(sku, err)
		}
	}
	l, err := f.c.Obtain(ctx, sku, ttl, opts...)
	if errors.Is(err, lock.ErrNotExist) {
		return nil, errtext.UnknownSKU(sku)
	}
	if err != nil {
		return nil, err
	}
	return fencedHold{l: l, store: f.store}, nil
}

type fencedHold struct {
	l     *lock.Lock
	store Store
}

func (h fencedHold) valid() bool { return h.l.Valid() }

func (h fencedHold) write(ctx context.Context, sku string, level int64) error {
	return h.store.WriteFenced(ctx, sku, level, h.l.Token())
}

func (h fencedHold) release(ctx context.Context) { _ = h.l.Release(ctx) }

// Retries returns the number of lock acquisitions retried so far.
func (g *Guarded) Retries() int64 { return g.retrier.Retries() }

// Decrement takes qty units of sku, all or none, under sku's lock. It
// returns nil or an error wrapping:
//   - stockguard.ErrInvalidRequest: bad sku or qty, checked before any
//     I/O;
//   - the context's error: ctx ended before the write was sent;
//   - stockguard.ErrUnknownSKU: sku has no stock (nothing is created, not
//     even a lock or a fencing counter);
//   - stockguard.ErrInsufficientStock: fewer than qty units are left;
//   - stockguard.ErrContention: the lock stayed busy (or was lost before the
//     write) through the retry policy, or ctx ended while retrying; nothing
//     was written;
//   - stockguard.ErrUnavailable: Redis could not serve (the stock could not
//     be read, also after the lock stayed out of reach); nothing was
//     written;
//   - stockguard.ErrOutcomeUnknown: the write was sent but its reply lost.
func (g *Guarded) Decrement(ctx context.Context, sku string, qty int64) error {
	if err := strategy.Validate(sku, qty); err != nil {
		return err
	}
	if err := strategy.Canceled(ctx); err != nil {
		return err
	}
	err := g.retrier.Do(ctx, func(ctx context.Context) error {
		return g.locked(ctx, sku, true, func(h hold) error {
			level, err := g.store.Stock(ctx, sku)
			if err != nil {
				return readFailed(sku, err)
			}
			if level < qty {
				return errtext.Insufficient(sku, level, qty)
			}
			return g.write(ctx, h, sku, level-qty)
		})
	})
	return g.gaveUp(ctx, sku, err)
}

// gaveUp checks, when every attempt found sku's lock busy, whether the
// stock's store can be read at all. A Redlock can fail for want of a
// quorum while the stock's master is down (the other masters are held by
// requests that then find it down): that SKU is not busy, its backend
// cannot serve, and the answer is ErrUnavailable, not ErrContention.
func (g *Guarded) gaveUp(ctx context.Context, sku string, err error) error {
	if !errors.Is(err, stockguard.ErrContention) || errors.Is(err, stockguard.ErrOutcomeUnknown) || strategy.Canceled(ctx) != nil {
		return err
	}
	if _, rerr := g.store.Stock(ctx, sku); errors.Is(rerr, stockguard.ErrUnavailable) {
		return fmt.Errorf("%w: the lock of %q stayed out of reach (%v) and its stock cannot be read: %w", stockguard.ErrUnavailable, sku, err, rerr)
	}
	return err
}

// SetStock creates sku with qty units (0…stockguard.MaxQty), or overwrites
// its level, under sku's lock, so it never lands in the middle of a
// decrement. It returns nil or an error wrapping
// stockguard.ErrInvalidRequest (bad input, before any I/O), the context's error, stockguard.ErrContention (lock busy through
// the retry policy, or nothing written) or stockguard.ErrOutcomeUnknown
// (the write may have been applied).
func (g *Guarded) SetStock(ctx context.Context, sku string, qty int64) error {
	if err := strategy.ValidateSet(sku, qty); err != nil {
		return err
	}
	if err := strategy.Canceled(ctx); err != nil {
		return err
	}
	return g.retrier.Do(ctx, func(ctx context.Context) error {
		return g.locked(ctx, sku, false, func(hold) error {
			return written(sku, g.store.SetStock(ctx, sku, qty))
		})
	})
}

// Stock returns the units of sku left; a single read needs no lock. Its
// errors wrap stockguard.ErrInvalidRequest (bad sku, before any
// I/O), the context's error, stockguard.ErrUnknownSKU or
// stockguard.ErrUnavailable (the read failed).
func (g *Guarded) Stock(ctx context.Context, sku string) (int64, error) {
	if err := strategy.ValidateSKU(sku); err != nil {
		return 0, err
	}
	if err := strategy.Canceled(ctx); err != nil {
		return 0, err
	}
	n, err := g.store.Stock(ctx, sku)
	if err != nil {
		return 0, readFailed(sku, err)
	}
	return n, nil
}

// locked runs fn holding sku's lock; known: see locker. A busy lock asks
// the retrier for another attempt.
func (g *Guarded) locked(ctx context.Context, sku string, known bool, fn func(hold) error) error {
	obtain := func(ctx context.Context, sku string, ttl time.Duration) (hold, error) {
		return g.locks.obtain(ctx, sku, ttl, known)
	}
	return withLock(ctx, sku, g.ttl, obtain, func(ctx context.Context, h hold) { h.release(ctx) }, fn)
}

// withLock runs fn holding the lock obtain takes on sku for lease, then
// releases it. A busy lock asks the retrier for another attempt; a contract
// error of obtain's is returned as it is; any other failure to obtain
// leaves the stock untouched.
func withLock[H any](ctx context.Context, sku string, lease time.Duration,
	obtain func(ctx context.Context, sku string, ttl time.Duration) (H, error),
	release func(ctx context.Context, h H), fn func(H) error) error {
	h, err := obtain(ctx, sku, lease)
	switch {
	case errors.Is(err, lock.ErrNotObtained):
		return strategy.Retry(err)
	case strategy.IsContract(err):
		return err
	case err != nil:
		// Whatever the obtain script did, the stock is untouched.
		return errtext.Wrap(redisx.Classify(ctx, err, redisx.Read), "redislock: lock %q", sku)
	}
	defer func() {
		// The outcome is decided; a failed release only leaves the lock to
		// expire. Release even when the caller's context has just ended.
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), lease)
		release(rctx, h)
		cancel()
	}()
	return fn(h)
}

// write stores level as sku's stock under h: fenced, or owner-guarded.
func (g *Guarded) write(ctx context.Context, h hold, sku string, level int64) error {
	if !h.valid() {
		// The lease ran out (a slow read, a pause): the store would refuse
		// the write if anyone has taken over, so don't send it.
		return strategy.Retry(fmt.Errorf("%w: the lease of %q ran out before the write", lock.ErrNotHeld, sku))
	}
	err := h.write(ctx, sku, level)
	if errors.Is(err, stockguard.ErrContention) && !errors.Is(err, stockguard.ErrOutcomeUnknown) {
		// Fenced off, or refused: nothing was written, so try again.
		return strategy.Retry(err)
	}
	return written(sku, err)
}

// written maps the error of a store write: contract errors as they are,
// anything else as a write that may have happened.
func written(sku string, err error) error {
	if err == nil || strategy.IsContract(err) {
		return err
	}
	return fmt.Errorf("%w: writing the stock of %q: %v", stockguard.ErrOutcomeUnknown, sku, err)
}

// readFailed maps the error of a store read: nothing was written, so an
// error that is not one of the contract's "nothing changed" ones is a
// store that cannot serve, ErrUnavailable — not ErrContention, which would
// tell the caller that trying again soon helps.
func readFailed(sku string, err error) error {
	if strategy.IsContract(err) && !errors.Is(err, stockguard.ErrOutcomeUnknown) {
		return err
	}
	return fmt.Errorf("%w: reading the stock of %q: %v", stockguard.ErrUnavailable, sku, err)
}
