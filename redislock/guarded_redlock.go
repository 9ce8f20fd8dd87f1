package redislock

import (
	"context"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stockguard/stockguard"
	"github.com/stockguard/stockguard/internal/errtext"
	"github.com/stockguard/stockguard/redislock/lock"
)

// WithStockMaster makes NewRedlockGuarded keep the stock on clients[i], i
// an index into its clients. Default 0, the first master.
func WithStockMaster(i int) Option {
	return func(o *options) {
		o.given |= optStockMaster
		if i < 0 {
			o.fail(fmt.Errorf("stock master %d is negative", i))
			return
		}
		o.stockMaster = i
	}
}

// NewRedlockGuarded returns a Guarded inventory whose SKU locks are Redlocks
// (lock.NewRedlock) over the independent masters clients, and whose stock lives
// on one of them, clients[i] for WithStockMaster(i) (default the first), in
// the keys NewAtomic uses. It reads the options WithPrefix, WithRetry,
// WithLockTTL, WithNodeTimeout, WithDrift, WithStockMaster, WithReplicaAck
// and WithAOFAck, not
// WithStore. When clients is empty, the stock master's index is out of
// range or an option is invalid, every method returns an error wrapping
// stockguard.ErrInvalidRequest.
//
// It exists to measure what Redlock costs next to NewGuarded's
// single-master lock. It is not safer for the stock, for this reason: a
// Redlock has no fencing token (see lock.Redlock), so the write is guarded by
// owner instead. One script on the stock's master writes only while that
// master's copy of the lock ("<prefix>lock:{sku}") holds this request's
// owner token, and a request reads the stock only once the stock's master
// itself has set the lock for it (a majority without it is given back and
// retried). So that copy held the request's token from before its read
// until its write; an owner token is fresh for every Obtain and never comes
// back once its copy expired or was released, and no other request of this
// kind writes without its own token in that copy. Hence no such write lands
// between a request's read and its write, however long a holder is paused
// and however the masters' clocks drift:
//   - a holder paused past its validity whose copy on the stock's master
//     has expired (and perhaps been taken over) has its write refused
//     (ErrNotHeld, so ErrContention); the request retries with a fresh lock
//     and a fresh read;
//   - a holder paused past its validity whose copy on the stock's master
//     has not expired yet (that master's clock runs slow, or the holder's SET
//     reached it last) has its write accepted, and rightly: while that copy
//     lives, nobody else can write. A second holder granted the Redlock by
//     the other masters meanwhile holds it by the algorithm's rules, but
//     cannot set the stock master's copy, so it gives the lock back and
//     retries without reading or writing. (Guarded does not send a write
//     whose validity has run out by its own clock; a pause after that check
//     is what the guard is for.)
//
// The safety of the stock thus rests on one key on one server, as with
// NewGuarded, and the quorum adds N−1 masters' round trips, not
// protection; the stock is unavailable whenever its master is, whatever the
// quorum. Nothing here protects against:
//   - the stock's master losing writes: a restart without persistence, or a
//     failover to an asynchronously replicated replica that had not yet
//     received the latest SETs, loses acknowledged decrements whatever lock
//     guarded them;
//   - writers that take no such lock: NewAtomic, watchtx, SetStock of other
//     types, and NewGuarded over the stock's master with the same prefix —
//     its writes are fenced by the fencing counter, which Redlocks do not
//     advance, so the two must not share a prefix;
//   - SetStock, which writes under the lock but unguarded (as NewGuarded's
//     does): one whose holder paused past its lease can overwrite a later
//     holder's write;
//   - a copy of the obtain command delivered to the stock's master after
//     go-redis resent it and had the answer (a network-delayed duplicate
//     could re-create an expired copy of the lock): theoretical on loopback
//     and ordinary TCP, but not excluded.
func NewRedlockGuarded(clients []redis.UniversalClient, opts ...Option) (*Guarded, error) {
	o := newOptions(opts)
	o.only("NewRedlockGuarded", readsRedlockGrd)
	if o.err != nil {
		return nil, o.err
	}
	r, err := lock.NewRedlock(clients, o.lockOptions()...)
	if err != nil {
		return nil, err // no masters
	}
	if o.stockMaster >= len(clients) {
		return nil, invalid(fmt.Errorf("stock master %d of %d masters", o.stockMaster, len(clients)))
	}
	store := newRedisStore(clients[o.stockMaster], o)
	return newGuarded(&redlockLocks{r: r, stock: o.stockMaster, store: store}, store, o), nil
}

// WithNodeTimeout sets how long NewRedlockGuarded's Redlock waits for
// each master, as lock.WithNodeTimeout does (which says which values are
// valid, and the default).
func WithNodeTimeout(d time.Duration) Option {
	return func(o *options) {
		o.given |= optNodeTimeout
		o.redlock = append(o.redlock, lock.WithNodeTimeout(d))
	}
}

// WithDrift sets the clock drift NewRedlockGuarded's Redlock allows for, as
// lock.WithDrift does (which says which values are valid, and the
// defaults).
func WithDrift(factor float64, fixed time.Duration) Option {
	return func(o *options) {
		o.given |= optDrift
		o.redlock = append(o.redlock, lock.WithDrift(factor, fixed))
	}
}

// redlockLocks are NewRedlockGuarded's locks: Redlocks whose writes are
// owner-guarded on the stock's master.
type redlockLocks struct {
	r     *lock.Redlock
	stock int // index of the stock's master
	store *RedisStore
}

// obtain takes sku's Redlock. Known or not, an unknown SKU leaves nothing
// behind: a Redlock has no fencing counter, and its copies go with Release.
func (rl *redlockLocks) obtain(ctx context.Context, sku string, ttl time.Duration, _ bool) (hold, error) {
	l, err := rl.r.Obtain(ctx, sku, ttl)
	if err != nil {
		return nil, err
	}
	if !l.GrantedBy(ctx, rl.stock) {
		// Without the stock master's copy the write would be refused, or
		// worse, accepted once a late SET lands after the read.
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), ttl)
		_ = l.Release(rctx)
		cancel()
		return nil, fmt.Errorf("%w: %q: the stock's master did not set the lock", lock.ErrNotObtained, sku)
	}
	return ownedHold{l: l, rl: rl}, nil
}

type ownedHold struct {
	l  *lock.QuorumLock
	rl *redlockLocks
}

func (h ownedHold) valid() bool { return h.l.Valid() }

func (h ownedHold) write(ctx context.Context, sku string, level int64) error {
	written, err := h.rl.store.writeIf(ctx, sku, level, h.rl.r.LockKey(sku), h.l.OwnerToken())
	switch {
	case err != nil:
		return errtext.Wrap(err, "redislock: owner-guarded write of %q", sku)
	case !written:
		return fmt.Errorf("%w: %w: the lock of %q on the stock's master is not this holder's any more; nothing written",
			lock.ErrNotHeld, stockguard.ErrContention, sku)
	}
	return nil
}

func (h ownedHold) release(ctx context.Context) { _ = h.l.Release(ctx) }
