package mysqllock

import (
	"context"
	"hash/fnv"
	"time"

	"github.com/stockguard/stockguard"
	"github.com/stockguard/stockguard/strategy"
)

// Take takes every line, or none, for good under id, in a batch with the
// instance's other order calls, whatever their SKUs. It returns as
// Atomic.Take does; an order
// the batch refuses is answered ErrInsufficientStock or ErrUnknownSKU and
// recorded nowhere, even if the batch's COMMIT fails.
func (b *Batched) Take(ctx context.Context, id string, lines ...stockguard.Line) error {
	if err := b.check(ctx, strategy.ValidateTake(id, lines)); err != nil {
		return err
	}
	return b.orders.Do(ctx, b.lane(id), orderCall{op: opPlace, order: newOrder{id: id, kind: kindTake, lines: strategy.SortedLines(lines)}})
}

// Hold takes every line, or none, under id until Confirm, Return, or ttl
// has passed by the server's clock; it batches and returns as Take does.
func (b *Batched) Hold(ctx context.Context, id string, ttl time.Duration, lines ...stockguard.Line) error {
	if err := b.check(ctx, strategy.ValidateHold(id, ttl, lines)); err != nil {
		return err
	}
	return b.orders.Do(ctx, b.lane(id), orderCall{op: opPlace, order: newOrder{id: id, kind: kindHold, ttl: ttl, lines: strategy.SortedLines(lines)}})
}

// Confirm makes the hold under id taken for good, in a batch with the
// instance's other order calls. It returns as Atomic.Confirm does.
func (b *Batched) Confirm(ctx context.Context, id string) error {
	if err := b.check(ctx, strategy.ValidateID(id)); err != nil {
		return err
	}
	return b.orders.Do(ctx, b.lane(id), orderCall{op: opConfirm, order: newOrder{id: id}})
}

// Return gives the units of the order under id back, exactly once, in a
// batch with the instance's other order calls; the calls after it in the
// batch may take them. It returns as Atomic.Return does.
func (b *Batched) Return(ctx context.Context, id string) error {
	if err := b.check(ctx, strategy.ValidateID(id)); err != nil {
		return err
	}
	return b.orders.Do(ctx, b.lane(id), orderCall{op: opReturn, order: newOrder{id: id}})
}

// lane returns the order queue of id: one per ID, so that two calls with
// one ID never run in two batches at once.
func (b *Batched) lane(id string) string {
	if len(b.lanes) == 1 {
		return b.lanes[0]
	}
	h := fnv.New32a()
	h.Write([]byte(id))
	return b.lanes[h.Sum32()%uint32(len(b.lanes))]
}
