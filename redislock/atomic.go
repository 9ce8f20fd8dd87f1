package redislock

import (
	"cmp"
	"context"
	_ "embed"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stockguard/stockguard"
	"github.com/stockguard/stockguard/internal/errtext"
	"github.com/stockguard/stockguard/internal/rediskeys"
	"github.com/stockguard/stockguard/internal/redisx"
	"github.com/stockguard/stockguard/strategy"
)

var (
	//go:embed level.lua
	levelLua string
	//go:embed atomic.lua
	atomicLua string
)

// atomicScript takes from one stock key that no order holds units of (a
// segment of NewSegmented). It is hashed once per process; Run sends
// EVALSHA and falls back to EVAL when a server has not seen the script yet.
var atomicScript = redis.NewScript(levelLua + atomicLua)

// AtomicClient is the part of a go-redis client that NewAtomic needs. Every
// redis.UniversalClient — *redis.Client, *redis.ClusterClient, a failover
// client — satisfies it; a *redis.Ring does too, and NewAtomic refuses it.
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
// Atomic is also a stockguard.Orders: see Take. Units held by an order and
// due back are given back by whatever touches the SKU next — Decrement
// included, before it refuses — so no sweeper runs.
//
// Writes are sent at most once: go-redis would otherwise resend a command
// whose reply was lost (Options.MaxRetries), taking the stock twice; Atomic
// reports ErrOutcomeUnknown instead.
//
// An Atomic is safe for concurrent use.
type Atomic struct {
	scripts   redis.Scripter // the client with EVAL/EVALSHA sent at most once
	levels    redisx.Levels
	keys      rediskeys.Keys
	sharding  sharding // how rdb spreads keys over servers
	retention time.Duration
	stream    string // WithOrderStream's key; "" for none
	bounds    bounds // WithAttemptValidity, WithClockSkew
	rdb       AtomicClient
	evictions *evictionCheck

	// Set by tests only: twoPhase runs every order through the two-phase
	// protocol, pending overrides pendingWindow, grace returnGrace, and
	// hook is called at the protocol's named points ("begun", "taken",
	// "committed", "finalized", "armed", "decided", "confirmed"); an error from it stops
	// the call there, as if its client had died. recordSkew shifts every
	// time an order record reports, as a record server whose clock is that
	// far ahead would.
	twoPhase   bool
	pending    time.Duration
	grace      time.Duration
	hook       func(point string) error
	recordSkew time.Duration
}

var (
	_ stockguard.Inventory = (*Atomic)(nil)
	_ stockguard.Orders    = (*Atomic)(nil)
)

// NewAtomic returns an Atomic over rdb. It reads the options WithPrefix,
// WithOrderRetention, WithOrderStream, WithAttemptValidity, WithClockSkew,
// WithReplicaAck and WithAOFAck (each script — a
// decrement, each Orders phase — is then followed by the ack's WAIT, and
// one whose WAIT falls short is ErrOutcomeUnknown). Over a *redis.ClusterClient, an
// order whose keys span slots runs through the two-phase protocol (see
// Take).
//
// Over a *redis.Ring, it returns an error wrapping
// stockguard.ErrInvalidRequest, before any I/O: a Ring sends the keys of a
// shard it votes down to another shard, where a SKU's level looks unknown
// or stale and an order's record absent, which the two-phase protocol
// reads as "give the units back". Its Orders methods also need servers
// that never evict a key (maxmemory 0 or maxmemory-policy noeviction).
func NewAtomic(rdb AtomicClient, opts ...Option) (*Atomic, error) {
	o := newOptions(opts)
	o.only("NewAtomic", readsAtomic)
	if _, ok := rdb.(*redis.Ring); ok {
		o.fail(errors.New("NewAtomic over a *redis.Ring: a Ring moves a shard's keys to another shard while it votes the shard down; use one Redis, a failover client or a Cluster"))
	}
	if o.err != nil {
		return nil, o.err
	}
	return newAtomic(rdb, o), nil
}

// newAtomic builds what NewAtomic returns, from valid options.
func newAtomic(rdb AtomicClient, o options) *Atomic {
	a := &Atomic{
		scripts:   redisx.OnceScripter(redisx.Acked(rdb, o.ack)),
		levels:    redisx.Levels{Client: rdb, Writer: redisx.Acked(rdb, o.ack), Keys: o.keys, Pkg: "redislock"},
		keys:      o.keys,
		sharding:  shardingOf(rdb),
		retention: cmp.Or(o.orders.retention, DefaultOrderRetention),
		stream:    o.orders.stream,
		bounds:    newBounds(o.orders),
		rdb:       rdb,
		evictions: &evictionCheck{},
	}
	return a
}

// Decrement takes qty units of sku, all or none. It returns nil or an error
// wrapping:
//   - stockguard.ErrInvalidRequest: bad sku or qty, checked before any I/O;
//   - the context's error: ctx ended before the script was sent;
//   - stockguard.ErrUnknownSKU: the stock key does not exist (nothing is
//     created), or it holds no stock level (then also stockguard.ErrCorruptStock);
//   - stockguard.ErrInsufficientStock: fewer than qty units are left, once
//     every hold due back is back;
//   - stockguard.ErrContention: Redis is busy (every pooled connection in
//     use, BUSY, TRYAGAIN); nothing was applied;
//   - stockguard.ErrUnavailable: Redis cannot serve (unreachable, nothing
//     sent; or it refused the script: OOM, READONLY…); nothing was applied;
//   - stockguard.ErrOutcomeUnknown: the connection failed or timed out after
//     the script was sent; it may have been applied.
//
// Only the last one leaves the stock in doubt. With WithOrderStream,
// Decrement is refused with ErrInvalidRequest.
func (a *Atomic) Decrement(ctx context.Context, sku string, qty int64) error {
	if err := a.admit(ctx, strategy.Validate(sku, qty)); err != nil {
		return err
	}
	if a.stream != "" {
		return fmt.Errorf("%w: redislock: decrement of %q: with an order stream, take an order instead", stockguard.ErrInvalidRequest, sku)
	}
	keys := []string{a.keys.Stock(sku), a.holdsKey(sku)}
	err := a.withResolve(ctx, func(decide string) (string, []string, string, error) {
		reply, err := decrementScript.Run(ctx, a.scripts, keys, qty, decide).Slice()
		if err != nil {
			return "", nil, "", redisx.Classify(ctx, err, redisx.Write)
		}
		switch replyInt(reply, 0) {
		case codeResolve:
			return sku, replyStrings(reply, 1), "", nil
		case codeMore:
			return "", nil, replyString(reply, 1), nil
		case codeUnknownSKU:
			return "", nil, "", errtext.UnknownSKU(sku)
		case codeShort:
			return "", nil, "", errtext.Insufficient(sku, errtext.Unknown, qty)
		case codeCorrupt:
			return "", nil, "", redisx.Corrupt(keys[0], "holds no stock level")
		}
		return "", nil, "", nil
	})
	if err != nil {
		return errtext.Wrap(err, "redislock: decrement %q", sku)
	}
	return nil
}

// SetStock creates sku with qty units (0…stockguard.MaxQty), or overwrites
// its stock level, whatever the key held. Units out on open orders are not
// part of the level: they come back on top of it, so a level that would
// leave them no room within MaxQty is refused. A hold due back is back
// already: SetStock first gives back every hold of sku due by then (asking
// a two-phase order's record, as Stock does), so that its units are
// replaced with the rest of the level, never added on top of it later. It returns nil or an error
// wrapping stockguard.ErrInvalidRequest (before any I/O; or qty plus the
// units out on open orders would pass MaxQty, nothing changed), the
// context's error, stockguard.ErrContention or ErrUnavailable (nothing
// applied; see Decrement) or stockguard.ErrOutcomeUnknown (the write may
// have been applied).
func (a *Atomic) SetStock(ctx context.Context, sku string, qty int64) error {
	_, err := a.SetStockHeld(ctx, sku, qty)
	return err
}

// SetStockHeld is SetStock that also returns the units of sku held on open
// holds when the level was set, as Held counts them, read in the script
// that set it: level + held is then the SKU's units not taken for good,
// however the holds are given back or confirmed after it (package tiered
// sets its back to it). Its errors are SetStock's.
func (a *Atomic) SetStockHeld(ctx context.Context, sku string, qty int64) (held int64, err error) {
	if err := a.admit(ctx, strategy.ValidateSet(sku, qty)); err != nil {
		return 0, err
	}
	keys := []string{a.keys.Stock(sku), a.holdsKey(sku)}
	var out int64 = -1 // the units out on open orders, when they refused qty
	err = a.withResolve(ctx, func(decide string) (string, []string, string, error) {
		reply, err := setStockScript.Run(ctx, a.scripts, keys, qty, decide).Slice()
		if err != nil {
			return "", nil, "", redisx.Classify(ctx, err, redisx.Write)
		}
		switch replyInt(reply, 0) {
		case codeResolve:
			return sku, replyStrings(reply, 1), "", nil
		case codeMore:
			return "", nil, replyString(reply, 1), nil
		case codeOverflow:
			out = replyInt(reply, 1)
		case 0:
			held = replyInt(reply, 1)
		}
		return "", nil, "", nil
	})
	switch {
	case err != nil:
		return 0, errtext.Wrap(err, "redislock: set stock of %q", sku)
	case out >= 0:
		return 0, fmt.Errorf("%w: redislock: set stock of %q: a level of %d leaves no room for the %d units out on open orders within %d",
			stockguard.ErrInvalidRequest, sku, qty, out, int64(stockguard.MaxQty))
	}
	return held, nil
}

// Stock returns the units of sku left, once every hold due back is back.
// Its errors wrap stockguard.ErrInvalidRequest (before any I/O), the
// context's error, stockguard.ErrUnknownSKU (no stock key; with
// stockguard.ErrCorruptStock, a key that holds no stock level) or
// stockguard.ErrUnavailable (the read failed) or ErrContention (Redis was
// busy).
func (a *Atomic) Stock(ctx context.Context, sku string) (int64, error) {
	if err := a.admit(ctx, strategy.ValidateSKU(sku)); err != nil {
		return 0, err
	}
	keys := []string{a.keys.Stock(sku), a.holdsKey(sku)}
	var level int64
	// Stock needs no cursor: its script gives back up to 1024 due holds a
	// call, and says whether more remain.
	err := a.withResolve(ctx, func(decide string) (string, []string, string, error) {
		for {
			reply, err := stockScript.Run(ctx, a.scripts, keys, decide).Slice()
			if err != nil {
				// Giving due holds back is no effect of the caller's: a
				// lost reply leaves nothing in doubt for it.
				return "", nil, "", redisx.Classify(ctx, err, redisx.Read)
			}
			switch level = replyInt(reply, 0); {
			case level == codeUnknownSKU:
				return "", nil, "", errtext.UnknownSKU(sku)
			case level == codeCorrupt:
				return "", nil, "", redisx.Corrupt(keys[0], "holds no stock level")
			case len(reply) > 2:
				return sku, replyStrings(reply, 2), "", nil
			case replyInt(reply, 1) == 0:
				return "", nil, "", nil
			}
		}
	})
	if err != nil {
		return 0, errtext.Wrap(err, "redislock: stock of %q", sku)
	}
	return level, nil
}

// sharding is how a client spreads keys over servers.
type sharding int8

const (
	unsharded     sharding = iota // one server: *redis.Client, a failover client
	shardedBySlot                 // *redis.ClusterClient
)

func shardingOf(rdb AtomicClient) sharding {
	switch rdb.(type) {
	case *redis.ClusterClient:
		return shardedBySlot
	}
	return unsharded
}

// admit checks a request before any I/O: the request's own validation
// (verr), then the context.
func (a *Atomic) admit(ctx context.Context, verr error) error {
	if verr != nil {
		return verr
	}
	return strategy.Canceled(ctx)
}
