package redislock

import (
	"context"
	_ "embed"
	"errors"
	"fmt"

	"github.com/redis/go-redis/v9"
	"github.com/stockguard/stockguard"
	"github.com/stockguard/stockguard/internal/combine"
	"github.com/stockguard/stockguard/internal/errtext"
	"github.com/stockguard/stockguard/internal/redisx"
	"github.com/stockguard/stockguard/strategy"
)

//go:embed batched.lua
var batchedLua string

// batchedScript is hashed once per process, like atomicScript, and reads
// levels and gives due holds back with the Orders scripts' helpers.
var batchedScript = ordersScript(batchedLua)

// DefaultBatchSize is NewBatched's default bound on the requests one script
// call carries.
const DefaultBatchSize = 64

// maxBatchSize bounds WithBatchSize: the script loops over its requests
// while Redis serves nobody else.
const maxBatchSize = 10_000

// WithBatchSize bounds how many queued requests of one SKU NewBatched
// combines into one script call, 1–10000; the rest wait for the next one.
// A call costs Redis little more for 64 requests than for one, so the bound
// mostly limits how many buyers one lost reply leaves with
// ErrOutcomeUnknown. A value outside 1–10000 makes every method of the
// Batched return an error wrapping stockguard.ErrInvalidRequest. Default
// DefaultBatchSize (64).
func WithBatchSize(n int) Option {
	return func(o *options) {
		o.given |= optBatchSize
		if n < 1 || n > maxBatchSize {
			o.fail(fmt.Errorf("batch size %d outside 1…%d", n, maxBatchSize))
			return
		}
		o.batchSize = n
	}
}

// Batched combines concurrent requests for one SKU into one Lua script call
// — flat combining, or client-side group commit. While a call for a SKU is
// in flight, further requests for it queue; when it returns, the whole
// queue (at most the batch size) goes out as the next call, whose script,
// on the SKU's stock key ("<prefix>stock:{sku}", the key NewAtomic uses),
// grants the requests in arrival order: each one that fits in what the
// requests before it left is granted, the others are refused, and the
// granted total is taken with one DECRBY. One round trip serves the whole
// batch.
//
// A refused request never fits in what is left after the requests before
// it, and the requests after it only take more: no request is refused
// while stock remains for it, and a later, smaller request may still be
// granted after a larger one was refused.
//
// Nothing waits to fill a batch: a request that finds its SKU idle goes
// out alone at once, and batches grow only as long as the calls take. So a
// hot SKU's throughput scales with the batch size while a request waits for
// the call in flight and its own — more only when over a batch size of
// requests is queued ahead of it.
//
// Calls are sent at most once (see Atomic). The grants and refusals of a
// call are in its reply: when that reply is lost, nobody knows which of
// the call's requests were granted, and every one of them gets
// ErrOutcomeUnknown — exactly those, and no request of another call.
//
// Batching happens within one instance; correctness rests on the script
// alone, which Redis runs without interleaving, so any number of
// instances, in any number of processes, may share the keys, also with
// NewAtomic. One SKU is one key, so Batched works on a Redis Cluster.
// Batched is safe for concurrent use; share one instance per process, or it
// has nothing to combine.
//
// Batched is also a stockguard.Orders with Atomic's keys and records, whose
// order calls of one slot are combined the same way: see Take. Holds due
// back are given back before a batch of decrements refuses one, as Atomic
// does.
type Batched struct {
	orders *Atomic // its scripts, keys and options; the paths that are not batched
	calls  *combine.Combiner[batchReq]
	placed *combine.Combiner[orderReq] // order calls, one queue per slot
	known  *placedLines                // the lines of orders placed here
}

var (
	_ stockguard.Inventory = (*Batched)(nil)
	_ stockguard.Orders    = (*Batched)(nil)
)

// NewBatched returns the combining strategy over rdb (scripting and
// Process, as NewAtomic). It reads the options WithPrefix,
// WithBatchSize, WithOrderRetention, WithOrderStream, WithAttemptValidity, WithClockSkew,
// WithReplicaAck and WithAOFAck (one WAIT per script call, so per batch;
// when it falls short every request of the batch gets ErrOutcomeUnknown).
// The pool needs a connection per SKU (and, for orders, per slot) being
// written at once, not per buyer. Over a *redis.Ring it returns an error
// wrapping stockguard.ErrInvalidRequest, as NewAtomic does, and so do
// options it does not read.
func NewBatched(rdb AtomicClient, opts ...Option) (*Batched, error) {
	o := newOptions(opts)
	o.only("NewBatched", readsBatched)
	if _, ok := rdb.(*redis.Ring); ok {
		o.fail(errors.New("NewBatched over a *redis.Ring: a Ring moves a shard's keys to another shard while it votes the shard down; use one Redis, a failover client or a Cluster"))
	}
	if o.err != nil {
		return nil, o.err
	}
	return newBatched(rdb, o), nil
}

// newBatched builds what NewBatched returns, from valid options.
func newBatched(rdb AtomicClient, o options) *Batched {
	b := &Batched{orders: newAtomic(rdb, o), known: newPlacedLines(placedKept)}
	b.calls = combine.New(combine.Config[batchReq]{Size: o.batchSize, Write: b.write, Answer: (*batchReq).result})
	b.placed = combine.New(combine.Config[orderReq]{Size: o.batchSize, Write: b.writeOrders, Answer: (*orderReq).result})
	return b
}

// BatchStats counts what a Batched instance sent.
type BatchStats struct {
	Batches  int64 // script calls attempted
	Requests int64 // requests those calls carried
}

// Stats returns the counts since the instance was created;
// Requests/Batches is the mean batch size.
func (b *Batched) Stats() BatchStats {
	batches, requests := b.calls.Stats()
	return BatchStats{Batches: batches, Requests: requests}
}

// batchReq is one request for a script call.
type batchReq struct {
	qty int64
	err error // its own outcome in the call's reply: nil, or a refusal
}

// result is r's answer once the call carrying it returned err.
func (r *batchReq) result(err error) error {
	if err != nil {
		return err
	}
	return r.err
}

// Decrement takes qty units of sku, all or none, in a batch with the other
// requests for sku. It returns nil or an error wrapping:
//   - stockguard.ErrInvalidRequest: bad sku or qty, or a nil ctx, checked
//     before any I/O;
//   - the context's error: ctx ended before any call carried the request,
//     which was dropped: nothing changed;
//   - stockguard.ErrUnknownSKU: the stock key does not exist (nothing is
//     created), or it holds no stock level (then also stockguard.ErrCorruptStock);
//   - stockguard.ErrInsufficientStock: fewer than qty units were left after
//     the requests ahead of it in its batch, once every hold due back was
//     back;
//   - stockguard.ErrContention: Redis is busy (every pooled connection in
//     use, a script running: BUSY, a resharding: TRYAGAIN); nothing changed;
//   - stockguard.ErrUnavailable: Redis cannot be reached, or refused the
//     call (OOM, READONLY, CLUSTERDOWN…); nothing changed;
//   - stockguard.ErrOutcomeUnknown: the call carrying the request was sent
//     but its reply was lost, or ctx ended while the request was claimed by
//     a call of the drainer (a request that went alone waits for its call's
//     reply). A request the script refused gets it too: its refusal was in
//     the lost reply.
func (b *Batched) Decrement(ctx context.Context, sku string, qty int64) error {
	if err := b.check(ctx, strategy.Validate(sku, qty)); err != nil {
		return err
	}
	if b.orders.stream != "" {
		return fmt.Errorf("%w: redislock: decrement of %q: with an order stream, take an order instead", stockguard.ErrInvalidRequest, sku)
	}
	return b.calls.Do(ctx, sku, batchReq{qty: qty})
}

// SetStock creates sku with qty units (0…stockguard.MaxQty), or overwrites
// its stock level, as Atomic.SetStock does (holds due back are given back
// first; a level that leaves the units out on open orders no room within
// MaxQty is refused). Its errors are Atomic.SetStock's.
func (b *Batched) SetStock(ctx context.Context, sku string, qty int64) error {
	return b.orders.SetStock(ctx, sku, qty)
}

// Stock returns the units of sku left once every hold due back is back, as
// Atomic.Stock does. Its errors are Atomic.Stock's.
func (b *Batched) Stock(ctx context.Context, sku string) (int64, error) {
	return b.orders.Stock(ctx, sku)
}

// SetStockHeld is Atomic.SetStockHeld.
func (b *Batched) SetStockHeld(ctx context.Context, sku string, qty int64) (held int64, err error) {
	return b.orders.SetStockHeld(ctx, sku, qty)
}

// Held is Atomic.Held.
func (b *Batched) Held(ctx context.Context, sku string) (level, held int64, err error) {
	return b.orders.Held(ctx, sku)
}

// check returns the first reason not to serve a request: the request's
// own validation error, or an ended (or nil) context.
func (b *Batched) check(ctx context.Context, invalid error) error {
	if invalid != nil {
		return invalid
	}
	return strategy.Canceled(ctx)
}

// write runs the script once for bt's members, claimed right before the
// call, in their order. It returns the call's error, or nil with each
// member's own outcome set.
func (b *Batched) write(ctx context.Context, sku string, bt *combine.Batch[batchReq]) error {
	m := bt.Members()
	if len(m) == 0 {
		return nil
	}
	keys := []string{b.orders.keys.Stock(sku), b.orders.holdsKey(sku)}
	args := make([]any, 1+len(m))
	for i, r := range m {
		args[1+i] = r.qty
	}
	var out batchReply
	err := b.orders.withResolve(ctx, func(decide string) (string, []string, string, error) {
		args[0] = decide
		reply, err := batchedScript.Run(ctx, b.orders.scripts, keys, args...).Result()
		if err != nil {
			return "", nil, "", redisx.Classify(ctx, err, redisx.Write)
		}
		if out, err = parseBatchReply(reply, len(m)); err != nil {
			return "", nil, "", err
		}
		return sku, out.remote, out.next, nil
	})
	key := keys[0]
	switch {
	case err != nil:
		return errtext.Wrap(err, "redislock: decrement %q (in a call of %d requests)", sku, len(m))
	case out.missing:
		return errtext.UnknownSKU(sku)
	case out.corrupt:
		return redisx.Corrupt(key, "holds no stock level")
	}
	left := out.level
	for i, r := range m {
		if out.granted[i] == '1' {
			r.err = nil
			left -= r.qty
		} else {
			r.err = errtext.Insufficient(sku, left, r.qty)
		}
	}
	return nil
}

// batchReply is what the batched script answered.
type batchReply struct {
	missing bool     // the stock key does not exist
	corrupt bool     // it holds no stock level
	remote  []string // due holds of two-phase orders to resolve first
	next    string   // the decide argument to call again with
	level   int64    // the level the batch took from
	granted string   // '1' for a granted request, '0' for a refused one
}

// parseBatchReply reads the script's reply to a call of n requests. A
// reply of another shape means the script cannot be trusted to have done
// what it says; it may have run, so the error wraps
// stockguard.ErrOutcomeUnknown.
func parseBatchReply(reply any, n int) (batchReply, error) {
	switch v := reply.(type) {
	case int64:
		switch v {
		case -1:
			return batchReply{missing: true}, nil
		case -3:
			return batchReply{corrupt: true}, nil
		}
	case []any:
		switch replyInt(v, 0) {
		case codeResolve:
			if ids := replyStrings(v, 1); len(ids) > 0 {
				return batchReply{remote: ids}, nil
			}
		case codeMore:
			if next := replyString(v, 1); next != "" {
				return batchReply{next: next}, nil
			}
		}
		if len(v) == 2 {
			level, ok1 := v[0].(int64)
			granted, ok2 := v[1].(string)
			if ok1 && ok2 && len(granted) == n && level >= 0 && validFlags(granted) {
				return batchReply{level: level, granted: granted}, nil
			}
		}
	}
	return batchReply{}, fmt.Errorf("%w: unexpected reply %v from the batched script", stockguard.ErrOutcomeUnknown, reply)
}

func validFlags(s string) bool {
	for i := range len(s) {
		if s[i] != '0' && s[i] != '1' {
			return false
		}
	}
	return true
}
