package redislock

import (
	"context"
	_ "embed"
	"fmt"

	"github.com/redis/go-redis/v9"
	"github.com/stockguard/stockguard"
	"github.com/stockguard/stockguard/internal/redisx"
)

var (
	//go:embed level.lua
	levelLua string
	//go:embed atomic.lua
	atomicLua string
)

// atomicScript is hashed once per process; Run sends EVALSHA and falls back
// to EVAL when a server has not seen the script yet.
var atomicScript = redis.NewScript(levelLua + atomicLua)

// ErrCorruptStock is wrapped, together with stockguard.ErrUnknownSKU, by
// the errors of a SKU whose stock key holds something stockguard did not
// write: not a string, or not the canonical decimal of 0…stockguard.MaxQty.
// Nothing was changed; SetStock overwrites the value.
var ErrCorruptStock = redisx.ErrCorrupt

// AtomicClient is the part of a go-redis client that NewAtomic needs. Every
// redis.UniversalClient — *redis.Client, *redis.ClusterClient, *redis.Ring,
// a failover client — satisfies it.
type AtomicClient interface {
	redis.Scripter
	Process(ctx context.Context, cmd redis.Cmder) error
}

// Atomic is an Inventory whose Decrement is one Lua script on the SKU's
// stock key ("<prefix>stock:{sku}"): it checks that the key exists and
// holds enough units, then DECRBYs it, all inside Redis, so no other client
// runs between the check and the write. It is the fastest Redis strategy
// and the one to pick unless the stock must live elsewhere.
//
// Writes are sent at most once: go-redis would otherwise resend a command
// whose reply was lost (Options.MaxRetries), taking the stock twice; Atomic
// reports ErrOutcomeUnknown instead.
//
// An Atomic is safe for concurrent use.
type Atomic struct {
	scripts redis.Scripter // the client with EVAL/EVALSHA sent at most once
	levels  redisx.Levels
}

var _ stockguard.Inventory = (*Atomic)(nil)

// NewAtomic returns an Atomic over rdb. It reads the option WithPrefix.
func NewAtomic(rdb AtomicClient, opts ...Option) *Atomic {
	o := newOptions(opts)
	return &Atomic{scripts: redisx.OnceScripter(rdb), levels: redisx.Levels{Client: rdb, Keys: o.keys, Pkg: "redislock"}}
}

// Decrement takes qty units of sku, all or none. It returns nil or an error
// wrapping:
//   - stockguard.ErrInvalidRequest: bad sku or qty, checked before any I/O;
//   - the context's error: ctx ended before the script was sent;
//   - stockguard.ErrUnknownSKU: the stock key does not exist (nothing is
//     created), or it holds no stock level (then also ErrCorruptStock);
//   - stockguard.ErrInsufficientStock: fewer than qty units are left;
//   - stockguard.ErrContention: nothing was sent (connection pool timeout,
//     Redis unreachable) or Redis refused the script (BUSY, OOM, READONLY…);
//   - stockguard.ErrOutcomeUnknown: the connection failed or timed out after
//     the script was sent; it may have been applied.
//
// Only the last one leaves the stock in doubt.
func (a *Atomic) Decrement(ctx context.Context, sku string, qty int64) error {
	if err := stockguard.Validate(sku, qty); err != nil {
		return err
	}
	if err := stockguard.Canceled(ctx); err != nil {
		return err
	}
	key := a.levels.Keys.Stock(sku)
	left, err := atomicScript.Run(ctx, a.scripts, []string{key}, qty).Int64()
	switch {
	case err != nil:
		return fmt.Errorf("redislock: decrement %q: %w", sku, redisx.Classify(ctx, err, redisx.Write))
	case left == -1:
		return fmt.Errorf("%w: %q", stockguard.ErrUnknownSKU, sku)
	case left == -2:
		return fmt.Errorf("%w: %q has fewer than %d units", stockguard.ErrInsufficientStock, sku, qty)
	case left == -3:
		return redisx.Corrupt(key, "holds no stock level")
	}
	return nil
}

// SetStock creates sku with qty units (0…stockguard.MaxQty), or overwrites
// its stock level, whatever the key held. It returns nil or an error
// wrapping stockguard.ErrInvalidRequest (before any I/O), the context's
// error, stockguard.ErrContention (nothing sent, or Redis refused) or
// stockguard.ErrOutcomeUnknown (the SET may have been applied).
func (a *Atomic) SetStock(ctx context.Context, sku string, qty int64) error {
	return a.levels.Set(ctx, sku, qty)
}

// Stock returns the units of sku left. Its errors wrap
// stockguard.ErrInvalidRequest (before any I/O), the context's error,
// stockguard.ErrUnknownSKU (no stock key; with ErrCorruptStock, a key that
// holds no stock level) or stockguard.ErrContention (the read failed).
func (a *Atomic) Stock(ctx context.Context, sku string) (int64, error) {
	return a.levels.Get(ctx, sku)
}
