package tiered

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"

	"github.com/stockguard/stockguard"
	"github.com/stockguard/stockguard/internal/errtext"
	"github.com/stockguard/stockguard/internal/redisx"
	"github.com/stockguard/stockguard/strategy"
)

// Recover re-seeds a front that lost its data (ErrFrontLost) from the back,
// and makes it sell again:
//
//   - each SKU of skus, and of the orders of ids, gets the back's level: the
//     units the back has not sold, net of its own holds (the front's holds
//     were lost with it, and never reached the back);
//   - each order of ids the back has taken or returned is recorded on the
//     front as it is on the back, so a retry of it is answered (taken
//     already, or ErrOrderMismatch for other lines) instead of taken again:
//     pass the IDs the back applied within the front's order retention
//     (redislock.WithOrderRetention), for instance from the back's ledger;
//   - then the stream, its group and a new epoch key are created (Setup), and
//     the Consumers, which refused with ErrFrontLost meanwhile, go on.
//
// The orders the front acknowledged and the back had not applied when the
// front lost its data are lost: the back never sold them, and the front now
// sells their units again. Run Recover with sales stopped: a sale while it
// runs may take units it records for a retried order (it then fails with
// that order's error; run it again). A front that has its epoch key is
// refused with an error wrapping stockguard.ErrInvalidRequest: Recover
// would overwrite live levels. Errors wrap stockguard.ErrInvalidRequest,
// ErrUnknownSKU (a SKU the back lacks), ErrUnavailable, ErrContention or
// the context's error, as the tiers report them; Recover can be repeated.
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
	switch n, err := o.rdb.Exists(ctx, EpochKey(o.stream)).Result(); {
	case err != nil:
		return errtext.Wrap(redisx.Classify(ctx, err, redisx.Read), "tiered: recover")
	case n == 1:
		return fmt.Errorf("%w: tiered: recover: the front has its epoch key %q: it did not lose its data", stockguard.ErrInvalidRequest, EpochKey(o.stream))
	}

	// What the back has: its orders of ids, and the levels of their SKUs
	// and of skus; need is what the orders take on the front.
	var orders []stockguard.OrderInfo
	levels, need := map[string]int64{}, map[string]int64{}
	for _, sku := range skus {
		levels[sku] = 0
	}
	for _, id := range ids {
		info, err := o.back.Order(ctx, id)
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
	for _, sku := range all {
		n, err := o.back.Stock(ctx, sku)
		if err != nil {
			return errtext.Wrap(err, "tiered: recover: stock of %q on the back", sku)
		}
		levels[sku] = n
	}

	// The orders first, on levels of exactly their units (a retry of a
	// previous Recover finds its records and takes nothing), then the
	// back's levels.
	for _, sku := range all {
		if err := o.front.SetStock(ctx, sku, need[sku]); err != nil {
			return errtext.Wrap(err, "tiered: recover: set stock of %q on the front", sku)
		}
	}
	replayed := map[string]bool{}
	for _, info := range orders {
		err := o.front.Take(ctx, info.ID, info.Lines...)
		if err == nil && info.State == stockguard.OrderReturned {
			err = o.front.Return(ctx, info.ID)
		}
		if err != nil && !errors.Is(err, stockguard.ErrOrderClosed) {
			return errtext.Wrap(err, "tiered: recover: order %q on the front", info.ID)
		}
		replayed[info.ID] = true
	}
	for _, sku := range all {
		if err := o.front.SetStock(ctx, sku, levels[sku]); err != nil {
			return errtext.Wrap(err, "tiered: recover: set stock of %q on the front", sku)
		}
	}

	// The entries of the recorded orders are the back's own effects: they
	// leave the stream before the group that would apply them exists.
	q := NewStreams(o.rdb, o.stream, o.group)
	backlog, err := q.Backlog(ctx)
	if err != nil {
		return errtext.Wrap(err, "tiered: recover")
	}
	var drop []string
	for _, e := range backlog {
		if replayed[e.Order] {
			drop = append(drop, e.ID)
		}
	}
	if len(drop) > 0 {
		if err := o.rdb.XDel(ctx, o.stream, drop...).Err(); err != nil {
			return errtext.Wrap(redisx.Classify(ctx, err, redisx.Write), "tiered: recover")
		}
	}
	return o.Setup(ctx)
}
