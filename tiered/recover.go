package tiered

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"slices"

	"github.com/redis/go-redis/v9"

	"github.com/stockguard/stockguard"
	"github.com/stockguard/stockguard/internal/errtext"
	"github.com/stockguard/stockguard/internal/redisx"
	"github.com/stockguard/stockguard/strategy"
)

// Recover re-seeds a front that lost its data (ErrFrontLost) from the back,
// as one procedure fenced from every other call, and makes it sell again:
//
//  1. the epoch key (EpochKey) becomes "recovering:" and a new token, also
//     over one an interrupted Recover left: from then on the front's
//     scripts, and the Consumers' reads and acknowledgements, refuse every
//     call but this Recover's (ErrFrontLost);
//  2. it waits WithApplyLease and a tenth of it: a Consumer sends the
//     entries of a read to the back only within its lease, so no consumer
//     of the lost front sends anything after this;
//  3. when the back is a strategy.Fencer, its fence (named after the
//     stream) moves to a new number, once every fenced transaction in
//     flight has ended: a consumer's transaction sent within its lease but
//     delivered late (its COMMIT held by the network) lands before this
//     returns, or changes nothing (the Consumers write through the view
//     fenced at their epoch's number);
//  4. the entries left in the stream (a front that lost only its epoch key)
//     are applied to the back as a Consumer would (fenced at the new
//     number), then the stream is deleted;
//  5. the back is read: each order of ids, and the level of each SKU of
//     skus and of those orders (the units it has not sold, net of its own
//     holds: the front's holds were lost with it and never reached it);
//  6. on the front, each of those SKUs gets exactly the units of its
//     orders, each order the back took or returned is recorded as it is on
//     the back (so a retry of it is answered — taken already,
//     ErrOrderClosed, or ErrOrderMismatch for other lines — not taken
//     again), and each SKU gets the back's level less the units the front
//     still holds (none on a front restarted empty);
//  7. the stream, holding the replays' own entries, is created again empty
//     with its group;
//  8. the back's levels are read again: when they moved since step 5 (a
//     back without a fence that committed a lost front's entry after its
//     consumer's lease), Recover fails and the front stays refused;
//  9. the epoch key gets the token, prefixed with the fence's number and a
//     dot: the front sells, and the Consumers go on under the new epoch,
//     writing through the back's view fenced at that number.
//
// Pass as ids the IDs the back applied within the front's order retention
// (redislock.WithOrderRetention), for instance from the back's ledger. The
// orders the front acknowledged and the back had not applied when the front
// lost its data are lost: the back never sold them, and the front sells
// their units again.
//
// Recover returns nil once the front agrees with the back (the front's
// level plus held units is the back's level for each SKU, and the stream is
// empty), or an error, the front still refused: run Recover again, after
// what the error names is resolved. A front that has its epoch is refused
// with an error wrapping stockguard.ErrInvalidRequest: Recover would
// overwrite live levels. Errors wrap stockguard.ErrInvalidRequest,
// ErrUnknownSKU (a SKU the back lacks), ErrUnavailable, ErrContention (also:
// another Recover moved the back's fence on), ErrOutcomeUnknown (a write of
// a tier, the back's fence included, may have applied: run Recover again)
// or the context's error, as the tiers report them.
func (o *Orders) Recover(ctx context.Context, skus, ids []string) error {
	for _, sku := range skus {
		if err := strategy.ValidateSKU(sku); err != nil {
			return err
		}
	}
	for _, id := range ids {
		if err := strategy.ValidateID(id); err != nil {
			return err
		}
	}
	if err := strategy.Canceled(ctx); err != nil {
		return err
	}

	// 1. Fence.
	var b [12]byte
	rand.Read(b[:]) // documented never to return an error
	token := hex.EncodeToString(b[:])
	ctx = withEpoch(ctx, recovering+token)
	switch v, err := beginScript.Run(ctx, o.rdb, []string{EpochKey(o.stream)}, recovering+token, recovering).Result(); {
	case err != nil:
		return errtext.Wrap(redisx.Classify(ctx, err, redisx.Write), "tiered: recover")
	case v != int64(1):
		return fmt.Errorf("%w: tiered: recover: the front has its epoch key %q: it did not lose its data", stockguard.ErrInvalidRequest, EpochKey(o.stream))
	}

	// 2. The lost front's consumers end their leases.
	if err := redisx.Sleep(ctx, o.lease+o.lease/10); err != nil {
		return fmt.Errorf("tiered: recover: waiting for the lost front's consumers: %w", err)
	}

	// 3. The back's fence moves on, once every fenced transaction in flight
	// has ended: no consumer of the lost front writes to the back after
	// this, however late its COMMIT travels.
	fencer, fenced := o.back.(strategy.Fencer)
	var number int64
	view := strategy.FencedOrders(o.back)
	if fenced {
		n, err := fencer.AdvanceFence(ctx, o.stream)
		if err != nil {
			return errtext.Wrap(err, "tiered: recover: advance the back's fence %q", o.stream)
		}
		number, view = n, fencer.Fenced(o.stream, n)
	}

	// 4. What the stream still has reaches the back.
	q := NewStreams(o.rdb, o.stream, o.group)
	if err := o.applyLeft(ctx, q, view); err != nil {
		return err
	}

	// 5. What the back has: its orders of ids, and the levels of their SKUs
	// and of skus; need is what the orders take on the front.
	var orders []stockguard.OrderInfo
	levels, need := map[string]int64{}, map[string]int64{}
	for _, sku := range skus {
		levels[sku] = 0
	}
	var known []any // record keys of the IDs the back applied
	for _, id := range ids {
		info, err := o.back.Order(ctx, id)
		if err == nil || errors.Is(err, stockguard.ErrOrderMismatch) {
			known = append(known, recordKeys(o.prefix).Name("order", id))
		}
		switch {
		case errors.Is(err, stockguard.ErrUnknownOrder), errors.Is(err, stockguard.ErrOrderMismatch):
			continue // none, or a restock's
		case err != nil:
			return errtext.Wrap(err, "tiered: recover: order %q on the back", id)
		case info.State != stockguard.OrderTaken && info.State != stockguard.OrderReturned:
			continue // a hold of the back's own: nothing a retry could take again
		}
		orders = append(orders, info)
		for _, l := range info.Lines {
			levels[l.SKU] = 0
			need[l.SKU] += l.Qty
		}
	}
	all := slices.Sorted(maps.Keys(levels))
	if err := o.backLevels(ctx, all, levels); err != nil {
		return err
	}

	// 6. The orders first, on levels of exactly their units (a retry of a
	// previous Recover finds its records and takes nothing), then the
	// back's levels. Nothing else runs on the front meanwhile: every other
	// call carries another epoch.
	for _, sku := range all {
		if err := o.front.SetStock(ctx, sku, need[sku]); err != nil {
			return errtext.Wrap(o.pinned(err), "tiered: recover: set stock of %q on the front", sku)
		}
	}
	for _, info := range orders {
		err := o.front.Take(ctx, info.ID, info.Lines...)
		if err == nil && info.State == stockguard.OrderReturned {
			err = o.front.Return(ctx, info.ID)
		}
		if o.forgot(err, info.ID) {
			continue // forgotten by the front, its ID already answered from the back (IDsKey)
		}
		if err != nil && !errors.Is(err, stockguard.ErrOrderClosed) {
			return errtext.Wrap(o.pinned(err), "tiered: recover: order %q on the front", info.ID)
		}
	}
	for _, sku := range all {
		// Holds the front kept (a front that lost only its epoch key) are
		// units the back counts as not sold.
		_, held, err := o.front.Held(ctx, sku)
		if err != nil {
			return errtext.Wrap(o.pinned(err), "tiered: recover: held units of %q on the front", sku)
		}
		if held > levels[sku] {
			return fmt.Errorf("%w: tiered: recover: the front holds %d units of %q, the back has %d; the front stays refused: return holds on the back's side or restock it, and run Recover again",
				stockguard.ErrInsufficientStock, held, sku, levels[sku])
		}
		if err := o.front.SetStock(ctx, sku, levels[sku]-held); err != nil {
			return errtext.Wrap(o.pinned(err), "tiered: recover: set stock of %q on the front", sku)
		}
	}

	if len(known) > 0 {
		if err := o.rdb.SAdd(ctx, IDsKey(o.stream), known...).Err(); err != nil {
			return errtext.Wrap(redisx.Classify(ctx, err, redisx.Write), "tiered: recover: the IDs the back applied")
		}
	}

	// 7. The replays' entries are the back's own effects: they leave with
	// the stream, which comes back empty with its group.
	if err := o.rdb.Del(ctx, o.stream).Err(); err != nil {
		return errtext.Wrap(redisx.Classify(ctx, err, redisx.Write), "tiered: recover")
	}
	if err := q.create(ctx); err != nil {
		return errtext.Wrap(err, "tiered: recover")
	}

	// 8. The back did not move while the front was re-seeded (a back
	// without a fence: a consumer of the lost front committing late).
	again := map[string]int64{}
	if err := o.backLevels(ctx, all, again); err != nil {
		return err
	}
	for _, sku := range all {
		if again[sku] != levels[sku] {
			return fmt.Errorf("%w: tiered: recover: the back's level of %q moved from %d to %d while the front was re-seeded (a consumer of the lost front committing late?); the front stays refused: run Recover again",
				stockguard.ErrContention, sku, levels[sku], again[sku])
		}
	}

	// 9. Arm, under the fence's number: the Consumers write to the back
	// through the view fenced at it.
	armed := armedEpoch(number, fenced, token)
	switch v, err := armScript.Run(ctx, o.rdb, []string{EpochKey(o.stream)}, recovering+token, armed).Result(); {
	case err != nil:
		return errtext.Wrap(redisx.Classify(ctx, err, redisx.Write), "tiered: recover: arm the front")
	case v != int64(1):
		return fmt.Errorf("%w: tiered: recover: another Recover took over the front; let it finish", stockguard.ErrContention)
	}
	o.epoch.Store(&armed)
	return nil
}

// beginScript sets the epoch key KEYS[1] to ARGV[1] unless it holds an
// armed epoch (a value not starting with ARGV[2]): 1 when set, 0 when not.
var beginScript = redis.NewScript(`
local v = redis.call('GET', KEYS[1])
if v and string.sub(v, 1, #ARGV[2]) ~= ARGV[2] then
  return 0
end
redis.call('SET', KEYS[1], ARGV[1])
return 1
`)

// armScript sets the epoch key KEYS[1] to ARGV[2] if it holds ARGV[1]: 1
// when set, 0 when not.
var armScript = redis.NewScript(`
if redis.call('GET', KEYS[1]) ~= ARGV[1] then
  return 0
end
redis.call('SET', KEYS[1], ARGV[2])
return 1
`)

// applyLeft applies to the back, as a Consumer would, every entry left in
// the stream of q (orders the front acknowledged before it lost its epoch
// key only, or the replays of an interrupted Recover: no-ops on the back),
// then deletes the stream. An entry the back does not take stops it.
func (o *Orders) applyLeft(ctx context.Context, q *Streams, view strategy.FencedOrders) error {
	left, err := q.Backlog(ctx)
	if err != nil {
		return errtext.Wrap(err, "tiered: recover: the stream left")
	}
	if len(left) > 0 {
		c := consumerOf(q, o.back, newOptions(nil))
		c.view = view
		done, later, stuck := c.apply(ctx, left)
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("tiered: recover: applying the stream left: %w", err)
		}
		if c.fenced.Load() {
			return fmt.Errorf("%w: tiered: recover: another Recover moved the back's fence on; let it finish", stockguard.ErrContention)
		}
		var keys []any // the back has these orders now: see IDsKey
		for _, e := range done {
			if e.Op == OpTake {
				keys = append(keys, recordKeys(o.prefix).Name("order", e.Order))
			}
		}
		if len(keys) > 0 {
			if err := o.rdb.SAdd(ctx, IDsKey(o.stream), keys...).Err(); err != nil {
				return errtext.Wrap(redisx.Classify(ctx, err, redisx.Write), "tiered: recover: the IDs the back applied")
			}
		}
		if refused := append(later, stuck...); len(refused) > 0 {
			return fmt.Errorf("%w: tiered: recover: the back did not take %d of the %d entries left in the stream, the first %v; the front stays refused: resolve them on the back (the Reconciler's backlog lists them) and run Recover again",
				stockguard.ErrUnavailable, len(refused), len(left), refused[0])
		}
	}
	if err := o.rdb.Del(ctx, o.stream).Err(); err != nil {
		return errtext.Wrap(redisx.Classify(ctx, err, redisx.Write), "tiered: recover")
	}
	return nil
}

// backLevels reads the back's level of each of skus into levels.
func (o *Orders) backLevels(ctx context.Context, skus []string, levels map[string]int64) error {
	for _, sku := range skus {
		n, err := o.back.Stock(ctx, sku)
		if err != nil {
			return errtext.Wrap(err, "tiered: recover: stock of %q on the back", sku)
		}
		levels[sku] = n
	}
	return nil
}
