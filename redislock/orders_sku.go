package redislock

import (
	"context"
	"fmt"
	"time"

	"github.com/stockguard/stockguard"
	"github.com/stockguard/stockguard/internal/errtext"
	"github.com/stockguard/stockguard/internal/redisx"
	"github.com/stockguard/stockguard/strategy"
)

// orderKey is the record of the order under id: "<prefix>order:{id}".
func (a *Atomic) orderKey(id string) string { return a.keys.Name("order", id) }

// holdsKey lists the units of sku that orders hold (see orders_lib.lua):
// "<prefix>holds:{sku}", in the slot of sku's stock.
func (a *Atomic) holdsKey(sku string) string { return a.keys.Name("holds", sku) }

// lineKey is the line record of a two-phase order's line of sku:
// "<prefix>line:{sku}<len(id)>:<id>", in the slot of sku's stock
// (rediskeys.Pair: no two (sku, id) pairs share a name).
func (a *Atomic) lineKey(sku, id string) string { return a.keys.Pair("line", sku, id) }

// withResolve runs a SKU-side script through call until it needs no hold
// resolved: call, given the script's decide argument (see decide_arg in
// orders_lib.lua), returns the SKU and the ids of the two-phase orders
// whose holds it found due, which only their order records can settle, or
// the argument to call it with again to walk on through the due holds
// (one call reads a bounded number of pages of them). When asking them
// settled none (their records, by their own clocks, still hold them), call
// runs once more told to decide without them; while a Return is deciding
// one, call waits for it and runs again, so that no answer misses units
// the record has just given back.
func (a *Atomic) withResolve(ctx context.Context, call func(decide string) (sku string, ids []string, next string, err error)) error {
	decide := "0"
	for wait := time.Millisecond; ; {
		sku, ids, next, err := call(decide)
		switch {
		case err != nil:
			return err
		case next != "":
			decide = next
			continue
		case len(ids) == 0:
			return nil
		}
		settled, deciding, err := a.resolve(ctx, sku, ids)
		switch {
		case err != nil:
			return err
		case deciding:
			if err := sleep(ctx, wait); err != nil {
				return err
			}
			wait = min(2*wait, 20*time.Millisecond)
		default:
			decide = flag01(!settled)
		}
	}
}

// sleep waits for d or until ctx ends, then returns its error.
func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return strategy.Canceled(ctx)
	case <-t.C:
		return nil
	}
}

// resolve settles the due holds of sku of the two-phase orders ids: it
// reads each order's record, which decides there and then whether a due
// pending order is abandoned or a hold expired, and applies the answer to
// the line (units back, or taken for good). It reports whether any line
// changed, and whether a Return is deciding one. Its errors are Classify's
// (Read: nothing of the caller's request was applied).
func (a *Atomic) resolve(ctx context.Context, sku string, ids []string) (settled, deciding bool, err error) {
	for _, id := range ids {
		r, err := a.recordOp(ctx, id, "view")
		if err != nil {
			return false, false, err
		}
		reply, err := a.resolveLine(ctx, sku, id, r, false)
		if err == nil && replyInt(reply, 0) == 3 {
			// A Return armed the line and has not decided in its grace:
			// disarm it at the record, then apply what the record says.
			if r, err = a.recordOp(ctx, id, "disarm"); err != nil {
				return false, false, err
			}
			reply, err = a.resolveLine(ctx, sku, id, r, true)
		}
		if err != nil {
			return false, false, err
		}
		if r.state == 't' && !r.sealed {
			// A finalize or the seal was lost (or a Return armed the
			// lines): seal it when this reader can; else the record stays
			// unsealed for the next one, or a call under its ID.
			_ = a.tidy(ctx, id, r, "finalize")
		}
		switch replyInt(reply, 0) {
		case 1:
			settled = true
		case 2:
			deciding = true
		}
	}
	return settled, deciding, nil
}

// resolveLine applies r, the record of id, to the line of sku (the resolve
// op of orders_line.lua); disarmed says r was read by the disarm op.
func (a *Atomic) resolveLine(ctx context.Context, sku, id string, r *record, disarmed bool) ([]any, error) {
	reply, err := lineScript.Run(ctx, a.scripts, a.lineKeys(sku, id), "resolve", id, r.nonce,
		a.retention.Milliseconds(), string(r.stateOrNone()), r.now, r.deadline, a.returnGrace().Microseconds(),
		time.Since(r.asked).Microseconds(), flag01(disarmed), a.lineTomb(), r.at(r.deadline)).Slice()
	if err != nil {
		return nil, redisx.Classify(ctx, err, redisx.Read)
	}
	if err := lineError(reply, a, stockguard.Line{SKU: sku}); err != nil {
		return nil, err
	}
	return reply, nil
}

// lineKeys are the keys of orders_line.lua for the line of sku of order id.
func (a *Atomic) lineKeys(sku, id string) []string {
	return []string{a.keys.Stock(sku), a.holdsKey(sku), a.lineKey(sku, id)}
}

// recordOp runs op of orders_record.lua on the record of id and returns
// the record as it left it. Errors are Classify's: Read for "view", which
// changes the record only as its deadlines say, and "disarm", which a
// reader runs for no effect of its caller's; Write for the ops that act
// for the caller.
func (a *Atomic) recordOp(ctx context.Context, id, op string, args ...any) (*record, error) {
	all := append([]any{op, a.retention.Milliseconds()}, args...)
	asked := time.Now()
	reply, err := recordScript.Run(ctx, a.scripts, []string{a.orderKey(id)}, all...).Slice()
	if err != nil {
		return nil, redisx.Classify(ctx, err, redisx.Effect(op != "view" && op != "disarm"))
	}
	r, err := parseRecord(reply, true)
	if err != nil {
		return nil, fmt.Errorf("order %q: %w", id, err)
	}
	r.asked = asked
	if skew := a.recordSkew.Microseconds(); skew != 0 {
		r.now += skew
		if r.pending != 0 {
			r.pending += skew
		}
		if r.deadline != 0 {
			r.deadline += skew
		}
	}
	return r, nil
}

// stateOrNone is r's state for a script, "" for no record.
func (r *record) stateOrNone() []byte {
	if r.state == 0 {
		return nil
	}
	return []byte{r.state}
}

// Held reads, in one script, sku's stock level and the units of it held by
// open holds whose record shares its slot — due holds not yet given back
// included — without giving any back: level + held is then the SKU's units
// not taken for good, whatever the reclaim does meanwhile (package tiered's
// Reconciler compares it with its back). Lines of two-phase orders are not
// counted. It returns an error wrapping stockguard.ErrInvalidRequest (bad
// sku, before any I/O), ErrUnknownSKU (no level; with stockguard.ErrCorruptStock when
// the key holds something else), ErrContention, ErrUnavailable, or the
// context's error.
func (a *Atomic) Held(ctx context.Context, sku string) (level, held int64, err error) {
	if err := a.admit(ctx, strategy.ValidateSKU(sku)); err != nil {
		return 0, 0, err
	}
	keys := []string{a.keys.Stock(sku), a.holdsKey(sku)}
	reply, err := heldScript.Run(ctx, a.scripts, keys).Slice()
	if err != nil {
		return 0, 0, errtext.Wrap(redisx.Classify(ctx, err, redisx.Read), "redislock: held of %q", sku)
	}
	switch level = replyInt(reply, 0); level {
	case codeUnknownSKU:
		return 0, 0, errtext.UnknownSKU(sku)
	case codeCorrupt:
		return 0, 0, redisx.Corrupt(keys[0], "holds no stock level")
	}
	return level, replyInt(reply, 1), nil
}
