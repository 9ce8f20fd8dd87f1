package counterexample

import (
	"context"
	"errors"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/stockguard/stockguard"
	"github.com/stockguard/stockguard/internal/redisx"
)

// GetSetLock is the SETNX + GETSET lock of the old Redis SETNX manual page
// and the articles that copied it, line for line: the lock's value is
// its expiry time (now + timeout, in milliseconds); SETNX takes a free
// lock; a taken one whose time has passed is taken over with GETSET if the
// old value is still the one just read; unlock GETs the value and DELs the
// key if it is the caller's. The key itself never expires.
//
// How it breaks: a holder stalls in the middle of its critical section,
// between reading the stock and writing it (Stall, default 2% of requests
// for twice the timeout). Its lock's time passes, another buyer takes the
// lock over with GETSET, reads the stock and writes its decrement; the
// stalled holder wakes and writes the level it computed from its stale
// read, erasing that decrement: a lost update, reported as oversold. The
// pattern has more holes — the unlock's GET and DEL are two commands, a
// losing GETSET overwrites the winner's expiry, and everything rests on
// the instances' clocks agreeing — but the stall is the one every
// deployment meets.
type GetSetLock struct {
	redisStock
	timeout time.Duration
	stall   Stall
}

var _ stockguard.Inventory = (*GetSetLock)(nil)

// NewGetSetLock keeps stock under "<prefix>stock:{sku}" and the lock under
// "<prefix>lock:{sku}", with a 5ms lock timeout and a 2% chance per request
// of a 10ms stall inside the critical section.
func NewGetSetLock(rdb redis.UniversalClient, prefix string) *GetSetLock {
	return &GetSetLock{
		redisStock: newRedisStock(rdb, prefix),
		timeout:    5 * time.Millisecond,
		stall:      Stall{Chance: 0.02, For: 10 * time.Millisecond},
	}
}

// Decrement takes the lock, reads, checks, writes and unlocks.
func (g *GetSetLock) Decrement(ctx context.Context, sku string, qty int64) error {
	if err := admit(ctx, sku, qty); err != nil {
		return err
	}
	lock := g.keys.Lock(sku)
	var value string
	err := spinLock(ctx, sku, func() (bool, error) {
		value = strconv.FormatInt(time.Now().Add(g.timeout).UnixMilli(), 10)
		return g.tryLock(ctx, lock, value)
	})
	if err != nil {
		return err
	}
	defer g.unlock(context.WithoutCancel(ctx), lock, value)
	return g.takeUnlocked(ctx, sku, qty, g.stall)
}

// tryLock takes the lock: SETNX, else GETSET over an expired value.
func (g *GetSetLock) tryLock(ctx context.Context, lock, value string) (bool, error) {
	ok, err := g.rdb.SetNX(ctx, lock, value, 0).Result()
	if err != nil || ok {
		return ok, redisx.Classify(ctx, err, redisx.Write)
	}
	current, err := g.rdb.Get(ctx, lock).Result()
	if errors.Is(err, redis.Nil) {
		return false, nil
	}
	if err != nil {
		return false, redisx.Classify(ctx, err, redisx.Read)
	}
	expiry, err := strconv.ParseInt(current, 10, 64)
	if err != nil || expiry >= time.Now().UnixMilli() {
		return false, nil
	}
	old, err := g.rdb.GetSet(ctx, lock, value).Result()
	if err != nil && !errors.Is(err, redis.Nil) {
		return false, redisx.Classify(ctx, err, redisx.Write)
	}
	return old == current, nil
}

// unlock releases the lock: GET, compare, DEL (two commands, not atomic).
func (g *GetSetLock) unlock(ctx context.Context, lock, value string) {
	if current, err := g.rdb.Get(ctx, lock).Result(); err == nil && current == value {
		g.rdb.Del(ctx, lock)
	}
}
