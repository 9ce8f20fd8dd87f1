package tiered

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/stockguard/stockguard"
	"github.com/stockguard/stockguard/internal/errtext"
	"github.com/stockguard/stockguard/internal/redisx"
	"github.com/stockguard/stockguard/redislock"
	"github.com/stockguard/stockguard/strategy"
)

// DefaultPrefix is the key prefix of New's front and stream (WithPrefix).
const DefaultPrefix = "stockguard:"

// Orders is a stockguard.Orders over a Redis front and a durable back (see
// the package doc). Its answers are the front's; the back follows through
// the stream, applied by a Consumer.
//
// An Orders is safe for concurrent use.
type Orders struct {
	rdb    redis.UniversalClient
	front  *redislock.Batched
	back   stockguard.Orders
	stream string
	group  string
	prefix string
	lease  time.Duration // WithApplyLease: how long Recover waits for the lost front's consumers

	epoch atomic.Pointer[string] // the armed epoch the calls carry; nil until read
	lost  atomic.Int64           // calls refused with ErrFrontLost
}

var (
	_ stockguard.Inventory = (*Orders)(nil)
	_ stockguard.Orders    = (*Orders)(nil)
)

// New returns the tiered Orders over the Redis rdb (a single server, or a
// failover client; not a Cluster or a Ring, whose orders would span slots)
// and back. It reads the options WithPrefix, WithFront, WithReplicaAck,
// WithGroup (the group Setup creates) and WithApplyLease (Recover's wait for
// the consumers of a lost front).
// A nil back, a Cluster or Ring client, or an invalid option is an error
// wrapping stockguard.ErrInvalidRequest.
func New(rdb redis.UniversalClient, back stockguard.Orders, opts ...Option) (*Orders, error) {
	o := newOptions(opts)
	o.only("New", readsNew)
	switch rdb.(type) {
	case *redis.ClusterClient, *redis.Ring:
		o.fail(errors.New("the front must be one Redis (an order's keys and the stream share no slot on a Cluster or Ring)"))
	}
	if back == nil {
		o.fail(errors.New("nil back"))
	}
	if o.err != nil {
		return nil, o.err
	}
	stream := StreamKey(o.prefix)
	front := append([]redislock.Option{redislock.WithPrefix(o.prefix)}, o.front...)
	front = append(front, redislock.WithOrderStream(stream))
	// Every script of the front carries the epoch its call read: see
	// fencedClient.
	batched, err := redislock.NewBatched(newFencedClient(rdb, stream, o.prefix), front...)
	if err != nil {
		o.fail(err)
		return nil, o.err
	}
	return &Orders{rdb: rdb, front: batched, back: back, stream: stream, group: o.group, prefix: o.prefix, lease: o.lease}, nil
}

// Setup makes the front ready to sell: it creates the stream, its consumer
// group, and the front's epoch key (EpochKey), whose absence tells every
// Orders and Consumer of the front that the front lost its data. It is a
// step of the front's deployment, like a schema's creation: a front that
// has its epoch is left as it is, but Setup run on a front that restarted
// empty arms it again without the orders it lost; recover such a front
// with Recover. Errors wrap stockguard.ErrUnavailable or the context's
// error.
func (o *Orders) Setup(ctx context.Context) error {
	if err := strategy.Canceled(ctx); err != nil {
		return err
	}
	if err := NewStreams(o.rdb, o.stream, o.group).create(ctx); err != nil {
		return errtext.Wrap(err, "tiered: setup")
	}
	var b [12]byte
	rand.Read(b[:]) // documented never to return an error
	if err := o.rdb.SetNX(ctx, EpochKey(o.stream), hex.EncodeToString(b[:]), 0).Err(); err != nil {
		return errtext.Wrap(redisx.Classify(ctx, err, redisx.Write), "tiered: setup")
	}
	return nil
}

// FrontLost is how many calls the Orders refused with ErrFrontLost.
func (o *Orders) FrontLost() int64 { return o.lost.Load() }

// StreamKey is the key of the stream under prefix: "<prefix>tiered:effects".
func StreamKey(prefix string) string { return prefix + "tiered:effects" }

// EpochKey is the key of the front's epoch next to stream:
// "<stream>:epoch". Setup and Recover write it; its absence means the
// front lost its data, and a value starting "recovering:" that Recover is
// re-seeding it. Every script the front runs, and every read and
// acknowledgement of its consumers, checks in the same round trip that it
// holds the value read when the call began.
func EpochKey(stream string) string { return stream + ":epoch" }

// ErrFrontLost is the error, wrapping stockguard.ErrUnavailable, of every
// call on a front that lost its data: its epoch key (EpochKey) is gone, as
// after a restart without persistence, or Recover is re-seeding it. The orders acknowledged by the front
// and not yet applied to the back are lost with it, and the front would
// sell again units the back already sold; recover it with Recover.
var ErrFrontLost = fmt.Errorf("%w: tiered: the front lost its data (its epoch key is gone or being recovered); recover it from the back", stockguard.ErrUnavailable)

// Take takes every line, or none, on the front, for good, under id; the
// back takes them when the Consumer applies the entry. Its errors are
// redislock.Batched.Take's, or ErrFrontLost.
func (o *Orders) Take(ctx context.Context, id string, lines ...stockguard.Line) error {
	err := o.call(ctx, id, func(ctx context.Context) error { return o.front.Take(ctx, id, lines...) })
	return o.forgotten(ctx, id, lines, err)
}

// Hold holds every line, or none, on the front, until Confirm, Return or
// ttl; the back hears of it only once it is confirmed. Its errors are
// redislock.Batched.Hold's, or ErrFrontLost.
func (o *Orders) Hold(ctx context.Context, id string, ttl time.Duration, lines ...stockguard.Line) error {
	err := o.call(ctx, id, func(ctx context.Context) error { return o.front.Hold(ctx, id, ttl, lines...) })
	return o.forgotten(ctx, id, lines, err)
}

// Confirm makes the hold under id taken for good on the front, and the
// back takes its lines when the Consumer applies the entry. Its errors are
// redislock.Batched.Confirm's, or ErrFrontLost.
func (o *Orders) Confirm(ctx context.Context, id string) error {
	return o.unknown(ctx, id, o.call(ctx, id, func(ctx context.Context) error { return o.front.Confirm(ctx, id) }))
}

// Return gives the units of the order under id back on the front, and, for
// an order taken, on the back when the Consumer applies the entry. Its
// errors are redislock.Batched.Return's, or ErrFrontLost.
func (o *Orders) Return(ctx context.Context, id string) error {
	return o.unknown(ctx, id, o.call(ctx, id, func(ctx context.Context) error { return o.front.Return(ctx, id) }))
}

// Order reports the order under id as the front knows it. Its errors are
// redislock.Batched.Order's, or ErrFrontLost.
func (o *Orders) Order(ctx context.Context, id string) (stockguard.OrderInfo, error) {
	var info stockguard.OrderInfo
	err := o.call(ctx, id, func(ctx context.Context) (err error) { info, err = o.front.Order(ctx, id); return err })
	return info, o.unknown(ctx, id, err)
}

// Stock reports the front's level of sku: the units a buyer can have now.
// Its errors are redislock.Batched.Stock's, or ErrFrontLost.
func (o *Orders) Stock(ctx context.Context, sku string) (int64, error) {
	var n int64
	err := o.call(ctx, "", func(ctx context.Context) (err error) { n, err = o.front.Stock(ctx, sku); return err })
	return n, err
}

// Restock adds qty units to the stocked sku once under id: on the back
// first, then on the front, so the front never sells a unit the back does
// not have. An id the front knows is answered by the front alone; a SKU
// the front lacks is ErrUnknownSKU, nothing changed. A back that refuses
// leaves the front alone (the back's error);
// a front that fails after the back restocked is ErrOutcomeUnknown: repeat
// the call, which the back's ledger makes a no-op there. Errors wrap
// stockguard.ErrUnknownSKU, ErrOrderMismatch, ErrInvalidRequest,
// ErrContention, ErrUnavailable (ErrFrontLost), ErrOutcomeUnknown or the
// context's error, as the tiers report them.
func (o *Orders) Restock(ctx context.Context, id, sku string, qty int64) error {
	if err := strategy.ValidateRestock(id, sku, qty); err != nil {
		return err
	}
	// Its front calls carry one epoch: a front recovered between them
	// would get units the back's level, read by Recover, has already.
	ctx, err := o.armed(ctx)
	if err != nil {
		return err
	}
	// An ID the front knows is answered there: an order's is a mismatch
	// (the back may not have heard of the order yet, and would restock), a
	// restock's was applied to the back before the front.
	// An ID the front forgot and the back applied is the back's to answer
	// (its ledger makes a retry of the same restock a no-op): the front
	// never restocks afresh under it.
	switch _, err := o.front.Order(ctx, id); {
	case err == nil:
		return errtext.Mismatch(id, "")
	case o.forgot(err, id):
		return errtext.Wrap(o.back.Restock(ctx, id, sku, qty), "tiered: restock %q under %q, forgotten by the front, on the back", sku, id)
	case errors.Is(err, stockguard.ErrOrderMismatch):
		if err := o.front.Restock(ctx, id, sku, qty); err != nil {
			return o.pinned(err)
		}
		return o.remember(ctx, id)
	case !errors.Is(err, stockguard.ErrUnknownOrder):
		return errtext.Wrap(o.pinned(err), "tiered: restock %q under %q", sku, id)
	}
	// A SKU the front lacks is refused before the back is changed: the
	// front's refusal after the back restocked would be final, and the
	// back would keep units the front never gets.
	if _, err := o.front.Stock(ctx, sku); err != nil {
		return errtext.Wrap(o.pinned(err), "tiered: restock %q under %q", sku, id)
	}
	if err := o.back.Restock(ctx, id, sku, qty); err != nil {
		return errtext.Wrap(err, "tiered: restock %q under %q on the back", sku, id)
	}
	if err := o.front.Restock(ctx, id, sku, qty); err != nil {
		return afterBack(o.pinned(err), "tiered: restock %q under %q on the front", sku, id)
	}
	return o.remember(ctx, id)
}

// SetStock sets sku's level to qty on the front, then, once the Consumer
// has applied every order of sku that was on its way to the back when the
// front was set (up to 30 s or ctx's end), the back's to qty plus the
// units held on the front as it was set (the back never sees holds). It is for stocking
// a SKU, or resetting one no order is placed on meanwhile: an order of sku
// placed on the front while SetStock runs may reach the back after its
// level and leave it off (the Reconciler reports it); add units to a live
// SKU with Restock. A back that fails or refuses after the front was set,
// or a wait that ends first, is ErrOutcomeUnknown (repeat the call).
// Errors wrap stockguard.ErrInvalidRequest, ErrContention, ErrUnavailable
// (ErrFrontLost), ErrOutcomeUnknown or the context's error.
func (o *Orders) SetStock(ctx context.Context, sku string, qty int64) error {
	if err := strategy.ValidateSet(sku, qty); err != nil {
		return err
	}
	ctx, err := o.armed(ctx)
	if err != nil {
		return err
	}
	// The back never hears of holds: its level is the front's plus the
	// units held there, read in the script that set the front, which a
	// Confirm takes from both tiers later, and a hold given back returns
	// to the front alone. Held read later would miss a hold given back in
	// between, and the back would lack its units.
	held, err := o.front.SetStockHeld(ctx, sku, qty)
	if err != nil {
		return errtext.Wrap(o.pinned(err), "tiered: set stock of %q on the front", sku)
	}
	// Orders of sku the front took or gave back before this level was set
	// are on their way to the back in the stream; set on the back first,
	// the level would have them applied on top of it. Wait until the
	// Consumer has applied each of them.
	pending, err := o.pendingOf(ctx, sku)
	if err != nil {
		return afterBack(err, "tiered: set stock of %q: orders on their way", sku)
	}
	giveUp := time.Now().Add(pendingWait)
	for _, id := range pending {
		if err := o.waitApplied(ctx, id, giveUp); err != nil {
			return afterBack(err, "tiered: set stock of %q on the back", sku)
		}
	}
	if err := o.back.SetStock(ctx, sku, qty+held); err != nil {
		return afterBack(err, "tiered: set stock of %q on the back", sku)
	}
	return nil
}

// How often SetStock looks again for an order on its way to the back, and
// for how long at most: with no Consumer running, it never arrives.
const (
	pendingPoll = 10 * time.Millisecond
	pendingWait = 30 * time.Second
)

// pendingOf returns the stream IDs of the orders on their way to the back
// with a line of sku, oldest first.
func (o *Orders) pendingOf(ctx context.Context, sku string) ([]string, error) {
	left, err := NewStreams(o.rdb, o.stream, o.group).Backlog(ctx)
	if err != nil {
		return nil, err
	}
	var ids []string
	for _, e := range left {
		if slices.ContainsFunc(e.Lines, func(l stockguard.Line) bool { return l.SKU == sku }) {
			ids = append(ids, e.ID)
		}
	}
	return ids, nil
}

// waitApplied waits until the stream entry id is gone (a Consumer applied
// and acknowledged it), polling that one entry: a long backlog is read once,
// by pendingOf, not at every poll.
func (o *Orders) waitApplied(ctx context.Context, id string, giveUp time.Time) error {
	for {
		msgs, err := o.rdb.XRangeN(ctx, o.stream, id, id, 1).Result()
		switch {
		case err != nil:
			return redisx.Classify(ctx, err, redisx.Read)
		case len(msgs) == 0:
			return nil
		case time.Now().After(giveUp):
			return fmt.Errorf("the order %s is still on its way to the back after %v", id, pendingWait)
		}
		if err := redisx.Sleep(ctx, pendingPoll); err != nil {
			return fmt.Errorf("waiting for the order %s on its way to the back: %w", id, err)
		}
	}
}

// Decrement takes qty units of sku as a one-line order under a fresh ID
// ("dec-" and 24 hex digits), so the back applies it exactly once too; the
// order is remembered like any other (see redislock.WithOrderRetention). Its
// errors are Take's: ErrInvalidRequest, ErrInsufficientStock,
// ErrUnknownSKU, ErrContention, ErrUnavailable (ErrFrontLost),
// ErrOutcomeUnknown or the context's error.
func (o *Orders) Decrement(ctx context.Context, sku string, qty int64) error {
	if err := strategy.Validate(sku, qty); err != nil {
		return err
	}
	var b [12]byte
	rand.Read(b[:]) // documented never to return an error
	id := "dec-" + hex.EncodeToString(b[:])
	return o.call(ctx, id, func(ctx context.Context) error { return o.front.Take(ctx, id, stockguard.Line{SKU: sku, Qty: qty}) })
}

// armed returns ctx carrying the front's armed epoch, read from the front
// the first time, or ErrFrontLost when the front has none (lost, or being
// recovered).
func (o *Orders) armed(ctx context.Context) (context.Context, error) {
	if err := strategy.Canceled(ctx); err != nil {
		return ctx, err
	}
	if e := o.epoch.Load(); e != nil {
		return withEpoch(ctx, *e), nil
	}
	v, err := o.readEpoch(ctx)
	if err != nil {
		return ctx, err
	}
	o.epoch.CompareAndSwap(nil, &v)
	return withEpoch(ctx, *o.epoch.Load()), nil
}

// readEpoch reads the front's armed epoch: ErrFrontLost when it has none.
func (o *Orders) readEpoch(ctx context.Context) (string, error) {
	v, err := o.rdb.Get(ctx, EpochKey(o.stream)).Result()
	switch {
	case errors.Is(err, redis.Nil):
		return "", o.frontLost("false")
	case err != nil:
		return "", redisx.Classify(ctx, err, redisx.Read)
	case strings.HasPrefix(v, recovering):
		return "", o.frontLost(v)
	}
	return v, nil
}

// call runs f, a call of the front, under the front's armed epoch as this
// Orders last saw it (f must pass its context to the front). When the
// front refuses it for another epoch — f applied nothing — f runs again
// under the one found, if armed: the first call of an Orders, or the first
// after Recover armed the front again (a late attempt of the lost front
// carries the old epoch and applies nothing). A front without an armed
// epoch is ErrFrontLost. When the front refuses f's script call because
// another order it carried (a batch) is an ID the front forgot — f's
// order, id, applied nothing — f runs again. The first attempt goes
// without a read of its own, so invalid input is refused before any I/O,
// by the front.
func (o *Orders) call(ctx context.Context, id string, f func(ctx context.Context) error) error {
	if ctx == nil {
		return f(ctx) // the front's answer: ErrInvalidRequest
	}
	epoch := ""
	if e := o.epoch.Load(); e != nil {
		epoch = *e
	}
	for fences, others := 0, 0; fences < 3; {
		err := f(withEpoch(ctx, epoch))
		if keys, ok := seen(err); ok && id != "" && !slices.Contains(keys, o.recordKey(id)) && others < 8 {
			// Another order of its script call was an ID the front forgot:
			// the call applied nothing, this order included.
			others++
			continue
		}
		found, ok := fenced(err)
		if !ok {
			return err
		}
		fences++
		if found == "false" || strings.HasPrefix(found, recovering) {
			return o.frontLost(found)
		}
		epoch = found
		o.epoch.Store(&epoch)
	}
	return fmt.Errorf("%w: tiered: the front's epoch kept changing", stockguard.ErrContention)
}

// pinned is err of a front call of a SetStock or Restock, whose calls carry
// one epoch: a refusal by the front's epoch check is ErrFrontLost.
func (o *Orders) pinned(err error) error {
	if found, ok := fenced(err); ok {
		return o.frontLost(found)
	}
	return err
}

// frontLost counts and returns the ErrFrontLost of a front whose epoch key
// holds found ("false": none).
func (o *Orders) frontLost(found string) error {
	o.lost.Add(1)
	if found == "false" {
		return fmt.Errorf("%w: no key %q", ErrFrontLost, EpochKey(o.stream))
	}
	if strings.HasPrefix(found, recovering) {
		return fmt.Errorf("%w: %q is being recovered (%s)", ErrFrontLost, EpochKey(o.stream), found)
	}
	return fmt.Errorf("%w: %q changed to %s while the call ran", ErrFrontLost, EpochKey(o.stream), found)
}

// remember adds the record key of id, a restock both tiers applied, to
// IDsKey: past the front's retention, the front refuses it. A failure is
// ErrOutcomeUnknown: the repeated call, a no-op on both tiers, adds it.
func (o *Orders) remember(ctx context.Context, id string) error {
	if err := o.rdb.SAdd(ctx, IDsKey(o.stream), recordKeys(o.prefix).Name("order", id)).Err(); err != nil {
		return afterBack(redisx.Classify(ctx, err, redisx.Write), "tiered: restock under %q: remember the ID", id)
	}
	return nil
}

// forgotten is err of a Take or Hold of id with lines; or, when the front
// refused id as an ID it forgot (past its order retention) and the back
// applied, the back's ledger's answer: nil for a retry of the order taken
// with these lines, ErrOrderClosed for one returned since, ErrOrderMismatch
// otherwise. The front never applies such an ID afresh: the back would
// answer its take as a retry of the old order, and the front alone would
// have sold its units.
func (o *Orders) forgotten(ctx context.Context, id string, lines []stockguard.Line, err error) error {
	if !o.forgot(err, id) {
		return err
	}
	info, err := o.back.Order(ctx, id)
	switch {
	case errors.Is(err, stockguard.ErrUnknownOrder), errors.Is(err, stockguard.ErrOrderMismatch):
		return errtext.Mismatch(id, "")
	case err != nil:
		return errtext.Wrap(err, "tiered: order %q, forgotten by the front, on the back", id)
	case !slices.Equal(info.Lines, strategy.SortedLines(lines)) || info.State != stockguard.OrderTaken && info.State != stockguard.OrderReturned:
		return errtext.Mismatch(id, "")
	case info.State == stockguard.OrderReturned:
		return errtext.Closed(id, info.State)
	}
	return nil
}

// unknown is err of a Confirm, Return or Order of id; when the front
// refused id as an ID it forgot and the back applied (past its retention,
// or lost with its data and recovered), ErrOrderMismatch if the back has
// it as a restock's (the contract's answer for one), else ErrUnknownOrder,
// as the front answers any ID past its retention.
func (o *Orders) unknown(ctx context.Context, id string, err error) error {
	if !o.forgot(err, id) {
		return err
	}
	switch _, err := o.back.Order(ctx, id); {
	case errors.Is(err, stockguard.ErrOrderMismatch):
		return err
	case err != nil && !errors.Is(err, stockguard.ErrUnknownOrder):
		return errtext.Wrap(err, "tiered: order %q, forgotten by the front, on the back", id)
	}
	return errtext.UnknownOrder(id)
}

// afterBack is the answer when one tier changed and the other then failed
// with err: ErrOutcomeUnknown, the only contract error it matches. Err's
// own (a refusal, say, which promises that nothing changed, or the
// context's end) is kept in the text only.
func afterBack(err error, format string, args ...any) error {
	if errors.Is(err, stockguard.ErrOutcomeUnknown) {
		return errtext.Wrap(err, format, args...)
	}
	return fmt.Errorf("%w: %s: %v", stockguard.ErrOutcomeUnknown, fmt.Sprintf(format, args...), err)
}
