package watchtx

import (
	"context"
	"errors"
	"fmt"

	"github.com/redis/go-redis/v9"
	"github.com/stockguard/stockguard"
	"github.com/stockguard/stockguard/internal/errtext"
	"github.com/stockguard/stockguard/internal/redisx"
	"github.com/stockguard/stockguard/strategy"
)

// Client is the part of a go-redis client that New needs. Every
// redis.UniversalClient — *redis.Client, *redis.ClusterClient, *redis.Ring,
// a failover client — satisfies it.
type Client interface {
	Watch(ctx context.Context, fn func(*redis.Tx) error, keys ...string) error
	Process(ctx context.Context, cmd redis.Cmder) error
}

// Inventory is a stockguard.Inventory over Redis optimistic transactions:
// WATCH the SKU's stock key ("<prefix>stock:{sku}"), GET it, check it, then
// MULTI / DECRBY / EXEC. If another client wrote the key after the WATCH,
// Redis aborts the EXEC, nothing is applied, and the request is retried
// under the retry policy. The check and the DECRBY both rest on the value
// read under WATCH; EXEC applies only if that value is still current.
//
// It needs one connection per request in flight (a WATCH pins one), so
// give the client a PoolSize of at least the number of concurrent callers.
// redislock.NewAtomic does the same in one round trip without retries and
// is faster on a hot key; watchtx is for when the check cannot be a script.
//
// An Inventory is safe for concurrent use.
type Inventory struct {
	rdb     Client
	ack     redisx.Ack          // WithReplicaAck, WithAOFAck; zero for none
	writer  redisx.ScriptClient // rdb through redisx.Acked: SetStock, and the WAITAOF probe
	levels  redisx.Levels
	retrier *strategy.Retrier
}

var (
	_ stockguard.Inventory  = (*Inventory)(nil)
	_ strategy.RetryCounter = (*Inventory)(nil)
)

// New returns an Inventory over rdb. It reads the options WithPrefix,
// WithRetry, WithReplicaAck and WithAOFAck.
func New(rdb Client, opts ...Option) (*Inventory, error) {
	o := options{retry: DefaultRetry()}
	for _, opt := range opts {
		opt(&o)
	}
	if o.err != nil {
		return nil, o.err
	}
	inv := &Inventory{
		rdb:     rdb,
		ack:     o.ack,
		levels:  redisx.Levels{Client: rdb, Keys: o.keys, Pkg: "watchtx"},
		retrier: strategy.NewRetrier(o.retry),
	}
	if o.ack.On() {
		sc, ok := rdb.(redisx.ScriptClient)
		if !ok {
			return nil, fmt.Errorf("%w: watchtx: WithReplicaAck needs a go-redis client (%T cannot pipeline a WAIT)", stockguard.ErrInvalidRequest, rdb)
		}
		inv.writer = redisx.Acked(sc, o.ack)
		inv.levels.Writer = inv.writer
	}
	return inv, nil
}

// Retries returns the number of times a Decrement was retried after a
// conflict, since inv was created.
func (inv *Inventory) Retries() int64 { return inv.retrier.Retries() }

// Decrement takes qty units of sku, all or none. It returns nil or an error
// wrapping:
//   - stockguard.ErrInvalidRequest: bad sku or qty, checked before any I/O;
//   - the context's error: ctx ended before anything was sent, or while a
//     read was in flight (nothing applied);
//   - stockguard.ErrUnknownSKU: the stock key does not exist (nothing is
//     created), or it holds no stock level (then also stockguard.ErrCorruptStock);
//   - stockguard.ErrInsufficientStock: fewer than qty units are left;
//   - stockguard.ErrContention: every attempt lost to another writer (then
//     also redis.TxFailedErr), every pooled connection was busy, or Redis
//     was busy (BUSY); nothing applied;
//   - stockguard.ErrUnavailable: Redis could not serve — unreachable, a
//     failed connection before EXEC, or a refusal such as READONLY,
//     LOADING, OOM, CLUSTERDOWN; nothing applied;
//   - stockguard.ErrOutcomeUnknown: the connection failed or timed out after
//     EXEC was sent; the decrement may have been applied. With
//     WithReplicaAck, also: EXEC applied it on the master but fewer than n
//     replicas confirmed it within the timeout (detail: "acknowledged by k
//     of n replicas within …"); with WithAOFAck on a server without
//     WAITAOF, ErrUnavailable before anything is sent.
func (inv *Inventory) Decrement(ctx context.Context, sku string, qty int64) error {
	if err := strategy.Validate(sku, qty); err != nil {
		return err
	}
	if err := strategy.Canceled(ctx); err != nil {
		return err
	}
	key := inv.levels.Keys.Stock(sku)
	err := inv.retrier.Do(ctx, func(ctx context.Context) error { return inv.attempt(ctx, key, sku, qty) })
	if err != nil {
		return errtext.Wrap(err, "watchtx: decrement %q", sku)
	}
	return nil
}

// attempt runs one WATCH … EXEC round. It returns strategy.Retry when
// EXEC was aborted, which applied nothing.
func (inv *Inventory) attempt(ctx context.Context, key, sku string, qty int64) error {
	var result error
	ran := false
	err := inv.rdb.Watch(ctx, func(tx *redis.Tx) error {
		ran = true
		result = inv.watched(ctx, tx, key, sku, qty)
		return result
	}, key)
	switch {
	case ran:
		return result
	case err == nil:
		// go-redis's ClusterClient.Watch follows MOVED, READONLY and a
		// closed node's pool to the slot's next master, up to MaxRedirects
		// times, and when the budget runs out on one of those it returns
		// nil without having called fn (the redirect's own lookup error,
		// nil, is what it returns). In a failover or a resharding that is
		// a WATCH that never ran: taking that nil for success acknowledged
		// units nobody took.
		return fmt.Errorf("%w: the WATCH of %q was redirected until the client gave up (the slot moved: a failover or resharding), nothing sent", stockguard.ErrUnavailable, key)
	}
	return redisx.Classify(ctx, err, redisx.Read) // the WATCH itself failed
}

// watched reads, checks and writes key on tx, whose connection WATCHes it.
func (inv *Inventory) watched(ctx context.Context, tx *redis.Tx, key, sku string, qty int64) error {
	have, err := redisx.GetLevel(ctx, tx, key, sku)
	if err != nil {
		return err
	}
	if have < qty {
		return errtext.Insufficient(sku, have, qty)
	}
	// DECRBY applies exactly the qty just checked against the level read
	// under WATCH, and EXEC runs only if that level is still current. (A SET
	// of the level read minus qty would be just as safe under WATCH, but
	// easy to get wrong: SET of count-- writes the old value back.)
	if inv.ack.On() {
		return inv.execAcked(ctx, tx, key, qty)
	}
	// Once keeps go-redis from resending the transaction after a lost reply.
	_, err = tx.TxPipelined(ctx, func(p redis.Pipeliner) error {
		return p.Process(ctx, redisx.Once(redis.NewIntCmd(ctx, "decrby", key, qty)))
	})
	if errors.Is(err, redis.TxFailedErr) {
		return strategy.Retry(err)
	}
	return redisx.Classify(ctx, err, redisx.Write)
}

// execAcked is the MULTI / DECRBY / EXEC of watched followed by the ack's
// WAIT, all four in one pipeline on tx's connection: WAIT inside MULTI
// would not block, and after a separate EXEC it would cost a second round
// trip. (go-redis's TxPipelined ends its pipeline with EXEC, hence the
// commands written out; Close then sends an UNWATCH, which go-redis cannot
// know EXEC made needless.)
func (inv *Inventory) execAcked(ctx context.Context, tx *redis.Tx, key string, qty int64) error {
	if err := redisx.Ready(ctx, inv.writer); err != nil {
		return err
	}
	p := tx.Pipeline()
	queued := redis.NewStatusCmd(ctx, "decrby", key, qty)
	exec := redis.NewSliceCmd(ctx, "exec")
	_ = p.Process(ctx, redis.NewStatusCmd(ctx, "multi"))
	_ = p.Process(ctx, queued)
	_ = p.Process(ctx, redisx.Once(exec))
	confirmed := redisx.Pipe(ctx, p, inv.ack)
	_, _ = p.Exec(ctx) // each command carries its own error
	switch err := exec.Err(); {
	case errors.Is(err, redis.Nil): // EXEC aborted: the key changed after WATCH
		return strategy.Retry(redis.TxFailedErr)
	case err != nil:
		return redisx.Classify(ctx, err, redisx.Write)
	}
	return redisx.Classify(ctx, confirmed(), redisx.Write)
}

// SetStock creates sku with qty units (0…stockguard.MaxQty), or overwrites
// its stock level, whatever the key held. A Decrement that read the old
// level retries. It returns nil or an error wrapping
// stockguard.ErrInvalidRequest (before any I/O), the context's error,
// stockguard.ErrUnavailable (unreachable, or Redis refused), ErrContention
// (Redis or the pool busy) or
// stockguard.ErrOutcomeUnknown (the SET may have been applied).
func (inv *Inventory) SetStock(ctx context.Context, sku string, qty int64) error {
	return inv.levels.Set(ctx, sku, qty)
}

// Stock returns the units of sku left. Its errors wrap
// stockguard.ErrInvalidRequest (before any I/O), the context's error,
// stockguard.ErrUnknownSKU (no stock key; with stockguard.ErrCorruptStock, a key that
// holds no stock level), stockguard.ErrUnavailable (the read failed) or
// ErrContention (Redis or the pool busy).
func (inv *Inventory) Stock(ctx context.Context, sku string) (int64, error) {
	return inv.levels.Get(ctx, sku)
}
