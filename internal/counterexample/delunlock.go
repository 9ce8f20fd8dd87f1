package counterexample

import (
	"context"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/stockguard/stockguard"
	"github.com/stockguard/stockguard/internal/redisx"
)

// DelUnlock takes the lock atomically (SET NX PX) but releases it with a
// plain DEL, without checking that it is still the caller's: the lock that
// "deletes someone else's lock after a business timeout".
//
// How it breaks: a holder stalls after writing the stock and before its
// DEL (Stall, default 2% of requests for twice the TTL — a GC pause, a slow
// log call in the finally block) while its lease runs out. A second buyer
// takes the lock; the stalled holder wakes and DELs it; a third buyer takes
// the now free lock while the second is between its read and its write.
// Two buyers read-modify-write at once: a lost update, reported as
// oversold. An owner-checked release (compare-and-delete) would have left
// the second buyer's lock alone.
type DelUnlock struct {
	redisStock
	ttl   time.Duration
	stall Stall
}

var _ stockguard.Inventory = (*DelUnlock)(nil)

// NewDelUnlock keeps stock under "<prefix>stock:{sku}" and the lock under
// "<prefix>lock:{sku}", with a 5ms lease and a 2% chance per request of a
// 10ms stall before the unlock.
func NewDelUnlock(rdb redis.UniversalClient, prefix string) *DelUnlock {
	return &DelUnlock{
		redisStock: newRedisStock(rdb, prefix),
		ttl:        5 * time.Millisecond,
		stall:      Stall{Chance: 0.02, For: 10 * time.Millisecond},
	}
}

// Decrement locks sku with SET NX PX, reads, checks, writes, DELs.
func (d *DelUnlock) Decrement(ctx context.Context, sku string, qty int64) error {
	if err := admit(ctx, sku, qty); err != nil {
		return err
	}
	lock := d.keys.Lock(sku)
	err := spinLock(ctx, sku, func() (bool, error) {
		ok, err := d.rdb.SetNX(ctx, lock, "1", d.ttl).Result()
		return ok, redisx.Classify(ctx, err, redisx.Write)
	})
	if err != nil {
		return err
	}
	defer func() {
		d.stall.maybe()
		d.rdb.Del(context.WithoutCancel(ctx), lock) // whoever's lock it is now
	}()
	return d.takeUnlocked(ctx, sku, qty, Stall{})
}
