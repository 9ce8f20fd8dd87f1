package redislock

import (
	"context"
	"errors"
	"math"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stockguard/stockguard"
	"github.com/stockguard/stockguard/strategy"
)

// closedClient is a client whose every command fails: what is checked
// "before any I/O" must not reach it.
func closedClient(t *testing.T) *redis.Client {
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"})
	rdb.Close()
	return rdb
}

func TestOptions_invalidIsDeferredErrInvalidRequest(t *testing.T) {
	rdb := closedClient(t)
	ctx := t.Context()
	masters := []redis.UniversalClient{rdb, rdb, rdb}
	tests := []struct {
		name string
		opt  Option
	}{
		{"WithPrefix with a hash tag", WithPrefix("{app}:")},
		{"WithPrefix with an open brace", WithPrefix("app{")},
		{"WithPrefix with a close brace", WithPrefix("app}")},
		{"WithLockTTL 0", WithLockTTL(0)},
		{"WithLockTTL below 1ms", WithLockTTL(time.Microsecond)},
		{"WithStore nil", WithStore(nil)},
		{"WithSegments 0", WithSegments(0)},
		{"WithSegments beyond MaxSegments", WithSegments(MaxSegments + 1)},
		{"WithNodeTimeout 0", WithNodeTimeout(0)},
		{"WithDrift negative factor", WithDrift(-0.1, 0)},
		{"WithDrift factor 1", WithDrift(1, 0)},
		{"WithDrift NaN", WithDrift(math.NaN(), 0)},
		{"WithDrift negative fixed", WithDrift(0.01, -time.Millisecond)},
		{"WithStockMaster negative", WithStockMaster(-1)},
		{"WithRetry MaxDelay below BaseDelay", WithRetry(strategy.RetryPolicy{BaseDelay: time.Second, MaxDelay: time.Millisecond})},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			inventories := map[string]stockguard.Inventory{
				"Guarded":        NewGuarded(rdb, tc.opt),
				"Segmented":      NewSegmented(rdb, tc.opt),
				"RedlockGuarded": NewRedlockGuarded(masters, tc.opt),
				"RedisStore":     storeInventory{NewRedisStore(rdb, tc.opt)},
			}
			for name, inv := range inventories {
				checkInvalid(t, name+".Decrement", inv.Decrement(ctx, "sku", 1))
				checkInvalid(t, name+".SetStock", inv.SetStock(ctx, "sku", 1))
				_, err := inv.Stock(ctx, "sku")
				checkInvalid(t, name+".Stock", err)
			}
			checkInvalid(t, "RedisStore.WriteFenced", NewRedisStore(rdb, tc.opt).WriteFenced(ctx, "sku", 1, 1))
			_, err := New(rdb, tc.opt).Obtain(ctx, "k", time.Second)
			checkInvalid(t, "Client.Obtain", err)
			_, err = NewRedlock(masters, tc.opt).Obtain(ctx, "k", time.Second)
			checkInvalid(t, "Redlock.Obtain", err)
		})
	}
}

func TestOptions_badConstructorArgumentsAreDeferred(t *testing.T) {
	rdb := closedClient(t)
	ctx := t.Context()
	_, err := NewRedlock(nil).Obtain(ctx, "k", time.Second)
	checkInvalid(t, "NewRedlock without masters: Obtain", err)
	g := NewRedlockGuarded(nil)
	checkInvalid(t, "NewRedlockGuarded without masters: Decrement", g.Decrement(ctx, "sku", 1))
	g = NewRedlockGuarded([]redis.UniversalClient{rdb}, WithStockMaster(1))
	checkInvalid(t, "NewRedlockGuarded, stock master 1 of 1: SetStock", g.SetStock(ctx, "sku", 1))
}

func TestObtain_invalidObtainOptions(t *testing.T) {
	c := New(closedClient(t))
	ctx := t.Context()
	ms := time.Millisecond
	for name, opts := range map[string][]ObtainOption{
		"ObtainRetry nil":                          {ObtainRetry(nil)},
		"LinearBackoff 0":                          {ObtainRetry(LinearBackoff(0))},
		"ExponentialBackoff lo 0":                  {ObtainRetry(ExponentialBackoff(0, ms))},
		"ExponentialBackoff hi below lo":           {ObtainRetry(ExponentialBackoff(5*ms, ms))},
		"LimitRetry nil":                           {ObtainRetry(LimitRetry(nil, 1))},
		"LimitRetry negative":                      {ObtainRetry(LimitRetry(LinearBackoff(ms), -1))},
		"LimitRetry of an invalid strategy":        {ObtainRetry(LimitRetry(LinearBackoff(0), 1))},
		"MaxHold 0":                                {MaxHold(0)},
		"IfExists empty":                           {IfExists("")},
		"Reentrant with NoFence":                   {Reentrant(NewOwner()), NoFence()},
		"Reentrant with IfExists":                  {Reentrant(NewOwner()), IfExists("x")},
		"an invalid one among valid ones":          {Notify(), MaxHold(-ms), Watchdog()},
		"an invalid one after a valid ObtainRetry": {ObtainRetry(NoRetry()), ObtainRetry(LinearBackoff(-1))},
	} {
		_, err := c.Obtain(ctx, "k", time.Second, opts...)
		checkInvalid(t, name, err)
	}
}

// storeInventory lets a RedisStore be checked like the inventories; its
// Decrement is a fenced write.
type storeInventory struct{ s *RedisStore }

func (i storeInventory) Decrement(ctx context.Context, sku string, qty int64) error {
	return i.s.WriteFenced(ctx, sku, qty, 1)
}
func (i storeInventory) SetStock(ctx context.Context, sku string, qty int64) error {
	return i.s.SetStock(ctx, sku, qty)
}
func (i storeInventory) Stock(ctx context.Context, sku string) (int64, error) {
	return i.s.Stock(ctx, sku)
}

func checkInvalid(t *testing.T, what string, err error) {
	t.Helper()
	if !errors.Is(err, stockguard.ErrInvalidRequest) || strategy.Contract(err) != stockguard.ErrInvalidRequest {
		t.Errorf("%s: %v, want only ErrInvalidRequest", what, err)
	}
}
