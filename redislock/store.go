package redislock

import (
	"context"
	_ "embed"
	"fmt"
	"strconv"

	"github.com/redis/go-redis/v9"
	"github.com/stockguard/stockguard"
	"github.com/stockguard/stockguard/internal/errtext"
	"github.com/stockguard/stockguard/internal/redisx"
	"github.com/stockguard/stockguard/strategy"
)

// Store is where a Guarded inventory keeps its stock levels. The lock
// serialises the holders; WriteFenced makes the store itself refuse a holder
// that lost the lock, which the lock alone cannot (see Lock).
//
// RedisStore is the default; mysqllock.NewFencedStore keeps the stock in a
// MySQL table with a fence column. Implementations must be safe for
// concurrent use and return errors that satisfy strategy.IsContract.
type Store interface {
	// SetStock creates sku with qty units or overwrites its level.
	SetStock(ctx context.Context, sku string, qty int64) error
	// Stock returns the units of sku left, or an error wrapping
	// stockguard.ErrUnknownSKU.
	Stock(ctx context.Context, sku string) (int64, error)
	// WriteFenced sets sku's level to qty on behalf of the holder of the
	// lock's fencing token token, unless a holder with a newer token has
	// written or may write: then it writes nothing and returns an error
	// wrapping stockguard.ErrContention.
	WriteFenced(ctx context.Context, sku string, qty, token int64) error
}

//go:embed guarded_write.lua
var guardedWriteLua string

var guardedWriteScript = redis.NewScript(guardedWriteLua)

// RedisStore keeps stock levels in Redis, in the same keys as NewAtomic
// ("<prefix>stock:{sku}", a decimal string), so the two are interchangeable
// on the same data.
//
// Its WriteFenced accepts a write only while the writer's token is the
// newest the SKU's fencing counter ("<prefix>fence:{sku}") has issued —
// checked in the same Lua script as the write, so no holder can obtain the
// lock between the check and the write. That is stricter than a fence
// column's "no newer token has written yet": once anyone else has obtained
// the lock, a late writer is refused. The counter is the one
// lock.Client.Obtain increments, so a RedisStore and the lock client must
// use the same prefix.
//
// Writes are sent at most once (a lost reply is ErrOutcomeUnknown, never a
// second write). A RedisStore is safe for concurrent use.
type RedisStore struct {
	scripts redis.Scripter // the client with EVAL/EVALSHA sent at most once
	levels  redisx.Levels
}

var _ Store = (*RedisStore)(nil)

// NewRedisStore returns a RedisStore over rdb (scripting and Process, as
// NewAtomic). It reads the options WithPrefix, WithReplicaAck and
// WithAOFAck, and refuses an invalid option with an error wrapping
// stockguard.ErrInvalidRequest.
func NewRedisStore(rdb AtomicClient, opts ...Option) (*RedisStore, error) {
	o := newOptions(opts)
	o.only("NewRedisStore", readsClient)
	if o.err != nil {
		return nil, o.err
	}
	return newRedisStore(rdb, o), nil
}

// newRedisStore builds what NewRedisStore returns, from valid options.
func newRedisStore(rdb AtomicClient, o options) *RedisStore {
	acked := redisx.Acked(rdb, o.ack)
	return &RedisStore{scripts: redisx.OnceScripter(acked), levels: redisx.Levels{Client: rdb, Writer: acked, Keys: o.keys, Pkg: "redislock"}}
}

// SetStock creates sku with qty units (0…stockguard.MaxQty) or overwrites
// its level. It is not fenced: Guarded calls it under the SKU's lock. It
// returns nil or an error wrapping stockguard.ErrInvalidRequest (before any
// I/O), the context's error, stockguard.ErrContention (Redis busy),
// stockguard.ErrUnavailable (nothing sent, or Redis refused) or
// stockguard.ErrOutcomeUnknown (the SET may have been
// applied).
func (s *RedisStore) SetStock(ctx context.Context, sku string, qty int64) error {
	return s.levels.Set(ctx, sku, qty)
}

// Stock returns the units of sku left. Its errors wrap
// stockguard.ErrInvalidRequest (before any I/O), the context's error,
// stockguard.ErrUnknownSKU (no stock key; with stockguard.ErrCorruptStock, a key that
// holds no stock level), stockguard.ErrContention (Redis busy) or
// stockguard.ErrUnavailable (the read failed).
func (s *RedisStore) Stock(ctx context.Context, sku string) (int64, error) {
	return s.levels.Get(ctx, sku)
}

// WriteFenced sets sku's level to qty if token is still the newest fencing
// token issued for sku. It returns nil, or an error wrapping:
//   - stockguard.ErrInvalidRequest: bad sku, level or token, before any I/O;
//   - the context's error: ctx ended before the script was sent;
//   - stockguard.ErrFenced (and so stockguard.ErrContention): a newer token exists,
//     nothing was written;
//   - stockguard.ErrUnknownSKU: the stock key is gone, nothing was written;
//   - stockguard.ErrContention: Redis or the pool was busy, nothing sent;
//   - stockguard.ErrUnavailable: nothing sent, or Redis refused the script;
//   - stockguard.ErrOutcomeUnknown: the connection failed after the script
//     was sent; it may have been applied.
func (s *RedisStore) WriteFenced(ctx context.Context, sku string, qty, token int64) error {
	if err := strategy.ValidateSet(sku, qty); err != nil {
		return err
	}
	if token < 1 {
		return fmt.Errorf("%w: fencing token %d, tokens start at 1", stockguard.ErrInvalidRequest, token)
	}
	written, err := s.writeIf(ctx, sku, qty, s.levels.Keys.Fence(sku), strconv.FormatInt(token, 10))
	switch {
	case err != nil:
		return errtext.Wrap(err, "redislock: fenced write of %q", sku)
	case !written:
		return fmt.Errorf("%w: %q, token %d", stockguard.ErrFenced, sku, token)
	}
	return nil
}

// writeIf sets sku's level to qty (both valid) if, and only if, guardKey
// (of sku's hash tag) holds guard, in one script sent at most once. It
// reports whether it wrote; errors are the context's (nothing sent),
// stockguard.ErrUnknownSKU (the stock key is gone, nothing written) or
// redisx.Classify's (Write).
func (s *RedisStore) writeIf(ctx context.Context, sku string, qty int64, guardKey, guard string) (bool, error) {
	if err := strategy.Canceled(ctx); err != nil {
		return false, err
	}
	keys := []string{s.levels.Keys.Stock(sku), guardKey}
	r, err := guardedWriteScript.Run(ctx, s.scripts, keys, qty, guard).Int64()
	switch {
	case err != nil:
		return false, redisx.Classify(ctx, err, redisx.Write)
	case r < 0:
		return false, errtext.UnknownSKU(sku)
	}
	return r == 1, nil
}
