package counterexample

import (
	"context"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/stockguard/stockguard"
	"github.com/stockguard/stockguard/internal/rediskeys"
	"github.com/stockguard/stockguard/internal/redisx"
	"github.com/stockguard/stockguard/strategy"
)

// redisStock keeps stock levels as plain strings under rediskeys names, as
// the lock-based patterns do, and reads and writes them with separate
// commands.
type redisStock struct {
	rdb  redis.UniversalClient
	keys rediskeys.Keys
	overlap
}

// ForceOverlap makes the pattern's race certain: the first two requests on
// each SKU of this key prefix, in any instance, are held at the pattern's
// window until both are in it. The harness's registrations force it; one
// request at a time, nothing changes but a wait of up to 10s at a window.
func (s *redisStock) ForceOverlap() { s.force("redis\x00" + s.keys.Prefix) }

func newRedisStock(rdb redis.UniversalClient, prefix string) redisStock {
	return redisStock{rdb: rdb, keys: rediskeys.Keys{Prefix: prefix}}
}

func (s redisStock) levels() redisx.Levels {
	return redisx.Levels{Client: s.rdb, Keys: s.keys, Pkg: "counterexample"}
}

// SetStock creates or overwrites sku's stock level.
func (s redisStock) SetStock(ctx context.Context, sku string, qty int64) error {
	return s.levels().Set(ctx, sku, qty)
}

// Stock returns sku's stock level, or ErrUnknownSKU.
func (s redisStock) Stock(ctx context.Context, sku string) (int64, error) {
	return s.levels().Get(ctx, sku)
}

// read GETs sku's stock level.
func (s redisStock) read(ctx context.Context, sku string) (int64, error) {
	return redisx.GetLevel(ctx, s.rdb, s.keys.Stock(sku), sku)
}

// write SETs sku's stock level to a value computed from an earlier read:
// the step that makes every pattern here a read-modify-write.
func (s redisStock) write(ctx context.Context, sku string, level int64) error {
	return redisx.SetLevel(ctx, s.rdb, s.keys.Stock(sku), level)
}

// takeUnlocked is the patterns' critical section: read, check, (stall),
// write the computed level.
func (s redisStock) takeUnlocked(ctx context.Context, sku string, qty int64, stall Stall) error {
	have, err := s.read(ctx, sku)
	if err != nil {
		return err
	}
	if have < qty {
		return insufficient(sku, have, qty)
	}
	s.meet(ctx, "read", sku)
	stall.maybe()
	return s.write(ctx, sku, have-qty)
}

// admit checks a Decrement's input and its context before any I/O.
func admit(ctx context.Context, sku string, qty int64) error {
	if err := strategy.Validate(sku, qty); err != nil {
		return err
	}
	return strategy.Canceled(ctx)
}

// Stall is an occasional pause of the application — a garbage-collection
// pause, a slow downstream call, a descheduled thread — the thing that
// real-life lock holders suffer now and then and lock TTLs are sized
// against. The zero value never stalls.
type Stall struct {
	// Chance is the probability of a stall per request, 0…1.
	Chance float64
	// For is how long a stall lasts.
	For time.Duration
}

func (s Stall) maybe() {
	if s.Chance > 0 && rand.Float64() < s.Chance {
		time.Sleep(s.For)
	}
}

// spin waits a little before another try at a busy lock: up to 500µs,
// jittered, much shorter than the usual 50ms sleeps so that the broken
// locks are busy enough under a short benchmark for their races to show.
func spin(ctx context.Context) error {
	t := time.NewTimer(rand.N(500 * time.Microsecond))
	defer t.Stop()
	select {
	case <-ctx.Done():
		return strategy.Canceled(ctx)
	case <-t.C:
		return nil
	}
}

// lockWait bounds how long a lock-based counterexample waits for its lock
// before giving up with ErrContention.
const lockWait = 5 * time.Second

// spinLock calls try until it takes sku's lock, spinning between tries;
// after lockWait it gives up with ErrContention. try's errors end the wait
// as they are.
func spinLock(ctx context.Context, sku string, try func() (bool, error)) error {
	deadline := time.Now().Add(lockWait)
	for {
		ok, err := try()
		if err != nil || ok {
			return err
		}
		if time.Now().After(deadline) {
			return contention(sku)
		}
		if err := spin(ctx); err != nil {
			return err
		}
	}
}

func contention(sku string) error {
	return fmt.Errorf("%w: lock on %q not obtained within %v", stockguard.ErrContention, sku, lockWait)
}
