package tiered

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/stockguard/stockguard"
	"github.com/stockguard/stockguard/internal/errtext"
)

// checkTries is how many times Check reads the tiers before it reports a
// SKU's drift: under traffic, an entry committed by the back but not yet
// acknowledged is counted twice by one reading, never by the next.
const checkTries = 3

// Drift is one SKU whose tiers do not add up.
type Drift struct {
	SKU string
	// Front is the front's level plus its units held (not taken for good):
	// what the back's level should be once the backlog is applied.
	Front int64
	// Back is the back's level.
	Back int64
	// InFlight is what the backlog's entries of the SKU will do to the
	// back's level (takes negative, returns positive), and Orders the IDs
	// of those entries' orders.
	InFlight int64
	Orders   []string
	// Diff is Back + InFlight - Front: units the back has beyond the front
	// (positive) or lacks (negative). Never 0 in a Drift.
	Diff int64
}

// Report is what Check found.
type Report struct {
	SKUs    int     // SKUs checked
	Drifts  []Drift // SKUs whose tiers do not add up
	Backlog []Entry // entries not acknowledged yet
}

// Reconciler compares the front and the back of a tiered Orders per SKU,
// and acknowledges entries the back's ledger shows applied already.
type Reconciler struct {
	o    *Orders
	q    Queue
	back stockguard.Orders
}

// NewReconciler returns the Reconciler of o (its front and back) and q, the
// queue its entries travel through (NewStreams of o's stream).
func NewReconciler(o *Orders, q Queue) *Reconciler {
	return &Reconciler{o: o, q: q, back: o.back}
}

// Check compares, for each SKU in skus, the front's level plus held units
// with the back's level plus the effect of the backlog's entries on it, and
// reports the SKUs where they differ, with the orders in flight. Under
// traffic it reads up to three times and reports only a drift seen every
// time. Its error wraps the tiers' or the queue's (stockguard.ErrUnknownSKU
// for a SKU one tier lacks, ErrUnavailable — ErrFrontLost for a front that
// lost its data —, ErrContention, the context's error).
func (r *Reconciler) Check(ctx context.Context, skus ...string) (Report, error) {
	var rep Report
	drifted := skus
	for try := 0; try < checkTries && len(drifted) > 0; try++ {
		backlog, err := r.q.Backlog(ctx)
		if err != nil {
			return Report{}, errtext.Wrap(err, "tiered: check: backlog")
		}
		rep = Report{SKUs: len(skus), Backlog: backlog}
		var next []string
		for _, sku := range drifted {
			d, err := r.drift(ctx, sku, backlog)
			if err != nil {
				return Report{}, err
			}
			if d.Diff != 0 {
				rep.Drifts = append(rep.Drifts, d)
				next = append(next, sku)
			}
		}
		drifted = next
	}
	return rep, nil
}

// drift reads one SKU of both tiers against backlog.
func (r *Reconciler) drift(ctx context.Context, sku string, backlog []Entry) (Drift, error) {
	d := Drift{SKU: sku}
	var level, held int64
	err := r.o.call(ctx, "", func(ctx context.Context) (err error) { level, held, err = r.o.front.Held(ctx, sku); return err })
	if err != nil {
		return d, errtext.Wrap(err, "tiered: check %q on the front", sku)
	}
	d.Front = level + held
	if d.Back, err = r.back.Stock(ctx, sku); err != nil {
		return d, errtext.Wrap(err, "tiered: check %q on the back", sku)
	}
	for _, e := range backlog {
		for _, l := range e.Lines {
			if l.SKU != sku {
				continue
			}
			if e.Op == OpTake {
				d.InFlight -= l.Qty
			} else {
				d.InFlight += l.Qty
			}
			if !slices.Contains(d.Orders, e.Order) {
				d.Orders = append(d.Orders, e.Order)
			}
		}
	}
	d.Diff = d.Back + d.InFlight - d.Front
	return d, nil
}

// Repair acknowledges the backlog's entries whose effect the back's ledger
// shows: a take whose order the back has taken (or taken and returned since),
// a return of an order the back has returned — entries whose consumer died
// between the back's commit and the acknowledgement. Nothing else is
// changed: what the ledger does not prove is left to the Consumer, or to
// whoever reads Check's report. It returns the entries acknowledged, and an
// error of the back's or the queue's.
func (r *Reconciler) Repair(ctx context.Context) ([]Entry, error) {
	// The acknowledgement carries the epoch read before the backlog: an
	// entry of a front lost since is not acknowledged on its successor.
	epoch, err := r.o.readEpoch(ctx)
	if err != nil {
		return nil, errtext.Wrap(err, "tiered: repair: epoch")
	}
	backlog, err := r.q.Backlog(ctx)
	if err != nil {
		return nil, errtext.Wrap(err, "tiered: repair: backlog")
	}
	var proven []Entry
	for _, e := range backlog {
		info, err := r.back.Order(ctx, e.Order)
		switch {
		case errors.Is(err, stockguard.ErrUnknownOrder):
			continue
		case err != nil:
			return nil, errtext.Wrap(err, "tiered: repair: order %q on the back", e.Order)
		}
		ok := slices.Equal(info.Lines, e.Lines)
		switch e.Op {
		case OpTake:
			ok = ok && (info.State == stockguard.OrderTaken || info.State == stockguard.OrderReturned)
		case OpReturn:
			ok = ok && info.State == stockguard.OrderReturned
		default:
			ok = false
		}
		if ok {
			proven = append(proven, e)
		}
	}
	if err := r.q.Ack(ctx, epoch, proven...); err != nil {
		return nil, fmt.Errorf("tiered: repair: %w", err)
	}
	return proven, nil
}
