package counterexample

import (
	"context"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/stockguard/stockguard"
	"github.com/stockguard/stockguard/internal/redisx"
)

// SetNXExpire is the lock many tutorials show as the second step: SETNX
// the lock, then EXPIRE it in a second command, read-check-write the
// stock, DEL the lock.
//
// The two commands leave a window in which the lock exists without a TTL;
// a holder that crashes inside it leaves a lock that never expires and
// every buyer waits forever. Code that lives with this pattern therefore
// repairs such orphans: a waiter that finds the lock with no TTL (TTL = −1)
// decides its holder died and deletes it. That repair cannot tell a dead
// holder from a live one that is between its SETNX and its EXPIRE, so it
// deletes live locks.
//
// How it breaks: a waiter's TTL check lands in a live holder's window, the
// waiter deletes the lock and takes it, and two buyers read-modify-write the
// stock at once — a lost update, which the audit reports as oversold. With
// a few concurrent buyers on one SKU the window is hit many times a second.
type SetNXExpire struct {
	redisStock
	ttl time.Duration
}

var _ stockguard.Inventory = (*SetNXExpire)(nil)

// NewSetNXExpire keeps stock under "<prefix>stock:{sku}" and the lock under
// "<prefix>lock:{sku}", with a 10s lock TTL (long: this pattern does not
// need a short TTL to fail).
func NewSetNXExpire(rdb redis.UniversalClient, prefix string) *SetNXExpire {
	return &SetNXExpire{redisStock: newRedisStock(rdb, prefix), ttl: 10 * time.Second}
}

// Decrement locks sku with SETNX + EXPIRE, reads, checks, writes, DELs.
func (s *SetNXExpire) Decrement(ctx context.Context, sku string, qty int64) error {
	if err := admit(ctx, sku, qty); err != nil {
		return err
	}
	lock := s.keys.Lock(sku)
	if err := spinLock(ctx, sku, func() (bool, error) { return s.tryLock(ctx, lock) }); err != nil {
		return err
	}
	defer s.rdb.Del(context.WithoutCancel(ctx), lock)
	return s.takeUnlocked(ctx, sku, qty, Stall{})
}

// tryLock SETNXes the lock and then EXPIREs it, in two commands; a lock
// it finds without a TTL it deletes and tries again at once.
func (s *SetNXExpire) tryLock(ctx context.Context, lock string) (bool, error) {
	for {
		ok, err := s.rdb.SetNX(ctx, lock, "1", 0).Result()
		if err != nil {
			return false, redisx.Classify(ctx, err, redisx.Write)
		}
		if ok {
			// The window: a waiter that comes now finds no TTL.
			s.meet(ctx, "setnx", lock)
			if err := s.rdb.Expire(ctx, lock, s.ttl).Err(); err != nil {
				return false, redisx.Classify(ctx, err, redisx.Write)
			}
			return true, nil
		}
		// The orphan repair: a lock without a TTL "must" be a crashed holder's.
		if ttl, err := s.rdb.TTL(ctx, lock).Result(); err == nil && ttl == -1 {
			s.rdb.Del(ctx, lock)
			continue
		}
		return false, nil
	}
}
