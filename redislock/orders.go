package redislock

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/stockguard/stockguard"
	"github.com/stockguard/stockguard/internal/errtext"
	"github.com/stockguard/stockguard/internal/redisx"
	"github.com/stockguard/stockguard/strategy"
)

// pendingWindow is how long a two-phase Take, Hold or Restock may stay
// pending: a Take or Hold still pending then (its client died between
// phases) is undone by whatever touches its SKUs or its ID next.
const pendingWindow = 30 * time.Second

// Take takes every line, or none, for good under id.
//
// An order whose keys — its record "<prefix>order:{id}" and each line's
// "<prefix>stock:{sku}" and "<prefix>holds:{sku}" — are in one slot (any
// order on a single Redis) is checked, taken and recorded by one script.
// On a Redis Cluster, an order whose keys span slots goes through a
// two-phase protocol anchored at its record: the record is begun
// (pending), each line is taken in its own slot under a line record
// "<prefix>line:{sku}/<id>" (idempotent per order, SKU and attempt), then
// the record is committed — or, when a line is refused, marked undoing
// while every line goes back, then deleted. The record alone decides; a
// client that dies between phases leaves a pending record whose lines are
// listed as due at its pending deadline (30s) or a hold's deadline, and
// the next call under id, or the next call that needs those SKUs' units
// (Decrement, Take, Hold, Stock), asks the record and finishes or undoes
// it.
//
// Memory (Redis 7.0, MEMORY USAGE of every key an order adds, 8-byte SKUs
// and IDs, a 7-byte prefix; TestAtomic_Orders_memory): a one-slot Take
// keeps about 120 bytes for 1 line and 170 for 5; a Hold, with its entries
// in its SKUs' holds, 160 and 315. A two-phase order adds a line record
// per line: a Take about 300 bytes for 1 line and 910 for 5, a Hold 330 and
// 1040; once returned or expired, its line records stay as tombstones
// (about 140 bytes a line) as long as its record. Records are kept for
// WithOrderRetention (DefaultOrderRetention, 7 days) after their last
// change, a hold's past its deadline; a two-phase order taken, from when
// every line has heard so (until then its record does not expire: its
// absence would tell the lines to give their units back). Each SKU with
// units out on open orders keeps their count in its holds (one member).
// Keys take no prefix with a brace (WithPrefix), and a line record's name
// is injective in (SKU, ID) (rediskeys.Keys.Pair).
//
// A refusal is final (docs/refusals.md): every
// attempt carries its deadline — the earlier of ctx's and
// WithAttemptValidity after it was sent — and does nothing once Redis's
// clock has passed it by WithClockSkew; a refusal leaves a tombstone in
// the order's record key for the validity plus twice the skew, which an
// attempt sent before the refusal plus the skew meets and does nothing.
// A call that meets one waits until its own clock has passed it and tries
// again, or answers ErrContention when ctx's deadline comes first.
//
// On a cluster, a Stock read while a multi-line two-phase order is pending
// counts its lines already taken, and that order may still be refused on
// another line and undone: the read then saw units that came back. Reads
// of one-line orders, and of orders on one slot, have no such window.
//
// Take returns nil (also for a retry of an order held or taken with the
// same lines), or an error wrapping:
//   - stockguard.ErrInvalidRequest: bad id or lines, before any I/O;
//   - stockguard.ErrInsufficientStock, ErrUnknownSKU (with stockguard.ErrCorruptStock
//     for a stock key that holds no level): nothing taken or recorded but
//     the refusal's tombstone;
//   - stockguard.ErrOrderMismatch: id was applied with other lines, or by
//     Hold or Restock (a Restock's ID is never an order's);
//   - stockguard.ErrOrderClosed: the order was returned or expired;
//   - stockguard.ErrContention: Redis was busy, or the attempt reached it
//     past its deadline or was sent before a refusal of id (see above),
//     nothing applied;
//   - stockguard.ErrUnavailable: Redis could not serve, nothing applied;
//   - stockguard.ErrOutcomeUnknown: the reply was lost, or the call stopped
//     with the order pending; repeat the call with the same arguments;
//   - the context's error: ctx ended before anything was sent.
func (a *Atomic) Take(ctx context.Context, id string, lines ...stockguard.Line) error {
	if err := a.admitOrder(ctx, strategy.ValidateTake(id, lines)); err != nil {
		return err
	}
	return a.place(ctx, kindTake, id, 0, lines)
}

// Hold takes every line, or none, under id until Confirm, Return, or ttl
// has passed by the clock of the Redis that keeps the order's record; then
// its units are back before any buyer of its SKUs is refused and before
// Stock answers, with no sweeper running. Its errors are Take's.
func (a *Atomic) Hold(ctx context.Context, id string, ttl time.Duration, lines ...stockguard.Line) error {
	if err := a.admitOrder(ctx, strategy.ValidateHold(id, ttl, lines)); err != nil {
		return err
	}
	return a.place(ctx, kindHold, id, ttl, lines)
}

// Restock adds qty units to the stocked sku once under id. It returns nil
// (also for a retry), or an error wrapping stockguard.ErrUnknownSKU
// (nothing recorded), ErrOrderMismatch (id was applied otherwise: by Take
// or Hold, or by a Restock of another SKU or qty), ErrInvalidRequest (bad
// input, before any I/O; or the level plus the units out on open orders
// plus qty would pass stockguard.MaxQty, nothing recorded), or
// ErrContention, ErrUnavailable, ErrOutcomeUnknown or the context's error
// as Take.
func (a *Atomic) Restock(ctx context.Context, id, sku string, qty int64) error {
	if err := a.admitOrder(ctx, strategy.ValidateRestock(id, sku, qty)); err != nil {
		return err
	}
	lines := []stockguard.Line{{SKU: sku, Qty: qty}}
	var err error
	if a.oneSlot(id, lines) {
		err = a.restockLocal(ctx, id, sku, qty)
	} else {
		err = a.placeRemote(ctx, kindRestock, id, 0, lines)
	}
	if err != nil {
		return errtext.Wrap(err, "redislock: restock %q under %q", sku, id)
	}
	return nil
}

// Confirm makes the hold under id taken for good, if its deadline has not
// passed: the order's record decides, in one script, against the clock of
// its Redis. It returns nil (also for an order taken already), or an
// error wrapping stockguard.ErrOrderClosed (returned or expired; an
// expired hold's units go back now), ErrUnknownOrder, ErrOrderMismatch (id
// was applied by Restock), or ErrInvalidRequest, ErrContention,
// ErrUnavailable, ErrOutcomeUnknown or the context's error as Take.
func (a *Atomic) Confirm(ctx context.Context, id string) error {
	return a.decide(ctx, "confirm", id)
}

// Return gives the units of the order under id back, exactly once. It
// returns nil for an order held, taken, returned or expired, or an error
// as Confirm's (but never ErrOrderClosed): ErrUnknownOrder,
// ErrOrderMismatch, ErrInvalidRequest, ErrContention, ErrUnavailable,
// ErrOutcomeUnknown or the context's error. It is never refused for want
// of room under stockguard.MaxQty (see SetStock). A two-phase order's
// Return first marks its lines due, then has the record decide, then
// gives the lines back; once the record has decided, whatever next reads a
// line's SKU gives back what this call did not reach, and a Return of an
// order returned already gives back any line that has not heard yet, so a
// later call of any client finishes one whose client died. A taken
// two-phase order whose line records have passed their retention answers
// ErrUnknownOrder, and nothing comes back.
func (a *Atomic) Return(ctx context.Context, id string) error {
	return a.decide(ctx, "return", id)
}

// Order reports the order applied under id. A hold past its deadline is
// OrderExpired, and its units go back now if nothing has given them back
// yet; a two-phase order left pending is finished or undone first. It
// returns an error wrapping stockguard.ErrUnknownOrder, ErrOrderMismatch
// (id was applied by Restock, which is no order), ErrInvalidRequest,
// ErrUnavailable or ErrContention (nothing changed) or the context's error.
func (a *Atomic) Order(ctx context.Context, id string) (stockguard.OrderInfo, error) {
	if err := a.admitOrder(ctx, strategy.ValidateID(id)); err != nil {
		return stockguard.OrderInfo{}, err
	}
	r, err := a.settled(ctx, "order", id)
	if err != nil {
		if errors.Is(err, stockguard.ErrOutcomeUnknown) {
			// Order only finishes what a record left pending; nothing of
			// its own is in doubt, it just could not be served.
			err = fmt.Errorf("%w: %v", stockguard.ErrUnavailable, err)
		}
		return stockguard.OrderInfo{}, errtext.Wrap(err, "redislock: order %q", id)
	}
	return r.info(id), nil
}

// returnGrace is how long a two-phase Return may take between marking its
// lines due and its record's decision. Meanwhile a reader that needs those
// SKUs' units waits for the decision; past it, the lines are taken again
// (a Return whose client died decided nothing).
const returnGrace = time.Second

// returnGrace is returnGrace, or the test's override.
func (a *Atomic) returnGrace() time.Duration { return cmp.Or(a.grace, returnGrace) }

// place runs a Take or a Hold.
func (a *Atomic) place(ctx context.Context, kind byte, id string, ttl time.Duration, lines []stockguard.Line) error {
	lines = strategy.SortedLines(lines)
	var err error
	switch {
	case a.stream != "" && !a.oneSlot(id, lines):
		err = fmt.Errorf("%w: with an order stream, an order's keys and the stream must share a slot", stockguard.ErrInvalidRequest)
	case a.oneSlot(id, lines):
		err = a.placeLocal(ctx, kind, id, ttl, lines)
	default:
		err = a.placeRemote(ctx, kind, id, ttl, lines)
	}
	if err != nil {
		verb := "take"
		if kind == kindHold {
			verb = "hold"
		}
		return errtext.Wrap(err, "redislock: %s %q", verb, id)
	}
	return nil
}

// decide runs a Confirm or a Return.
func (a *Atomic) decide(ctx context.Context, op, id string) error {
	if err := a.admitOrder(ctx, strategy.ValidateID(id)); err != nil {
		return err
	}
	r, err := a.settled(ctx, op, id)
	switch {
	case err != nil:
		return errtext.Wrap(err, "redislock: %s %q", op, id)
	case op == "confirm" && r.state != 't':
		return errtext.Closed(id, orderState(r.state))
	}
	return nil
}

// settled reads the record of id and applies op ("confirm", "return" or
// "order") to it, by one script when the order's keys share a slot,
// through the two-phase protocol otherwise. It returns the record as op
// left it, or an error wrapping ErrUnknownOrder, ErrOrderMismatch (a
// restock's id) or Classify's.
func (a *Atomic) settled(ctx context.Context, op, id string) (*record, error) {
	for range 3 {
		reply, err := readScript.Run(ctx, a.scripts, []string{a.orderKey(id)}).Slice()
		if err != nil {
			return nil, redisx.Classify(ctx, err, redisx.Read)
		}
		r, err := parseRecord(reply, false)
		switch {
		case err != nil:
			return nil, err
		case r.state == 0:
			return nil, errtext.UnknownOrder(id)
		case r.kind == kindRestock:
			return nil, errtext.Mismatch(id, "Restock")
		case r.nonce != "":
			return a.settleRemote(ctx, op, id)
		}
		r, err = a.actLocal(ctx, op, id, r)
		if !errors.Is(err, errReread) {
			return r, err
		}
	}
	return nil, fmt.Errorf("%w: the record of %q kept changing", stockguard.ErrContention, id)
}

// oneSlot reports whether the keys of the order id with lines are on one
// server whatever the sharding, so one script can run it: always on a
// single Redis; in one slot on a cluster.
func (a *Atomic) oneSlot(id string, lines []stockguard.Line) bool {
	if a.twoPhase {
		return false
	}
	same := func(x, y string) bool { return true }
	if a.sharding == shardedBySlot {
		same = func(x, y string) bool { return slot(x) == slot(y) }
	}
	order := a.orderKey(id)
	if a.stream != "" && !same(order, a.stream) {
		return false
	}
	for _, l := range lines {
		if !same(order, a.keys.Stock(l.SKU)) {
			return false
		}
	}
	return true
}

// refusal is the error of a script's code for a line of sku that could
// not be taken (or restocked): codeUnknownSKU, codeShort, codeCorrupt or
// codeOverflow; nil for other codes.
func (a *Atomic) refusal(code int64, l stockguard.Line) error {
	switch code {
	case codeUnknownSKU:
		return errtext.UnknownSKU(l.SKU)
	case codeShort:
		return errtext.Insufficient(l.SKU, errtext.Unknown, l.Qty)
	case codeCorrupt:
		return redisx.Corrupt(a.keys.Stock(l.SKU), "holds no stock level")
	case codeOverflow:
		return fmt.Errorf("%w: restocking %q by %d would pass %d units", stockguard.ErrInvalidRequest, l.SKU, l.Qty, int64(stockguard.MaxQty))
	}
	return nil
}
