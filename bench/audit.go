package bench

import (
	"context"
	"fmt"

	"github.com/stockguard/stockguard"
)

// Audit compares what buyers were told with what the store says is gone,
// over every SKU the run touched (warm-up included).
//
// The store's final stock is read twice: through the strategy's Stock, and,
// when the target has one, straight from the backend. Each figure below
// takes the worse of the two readings, SKU by SKU, so neither a lying Stock
// nor a stray write outside the strategy's view goes unnoticed, and a
// surplus on one SKU never hides a deficit on another.
type Audit struct {
	// Initial is the stock put on the SKUs before the run.
	Initial int64
	// Acked is the units of successful decrements.
	Acked int64
	// Gone is Initial minus the final stock (the backend's reading when
	// there is one).
	Gone int64
	// Final is the final stock read through Stock; RawFinal read from the
	// backend, when Raw is set.
	Final    int64
	RawFinal int64
	Raw      bool
	// Unknown counts requests that ended ErrOutcomeUnknown; UnknownUnits
	// their units, which may or may not have gone.
	Unknown      int64
	UnknownUnits int64
	// Oversold is the units acknowledged beyond what legitimately left the
	// store: lost updates (two buyers told yes for one unit's worth of
	// stock change) and stock driven below zero.
	Oversold int64
	// Lost is the stock gone that nobody was told they got, beyond the
	// units of unknown outcomes.
	Lost int64
	// FalseRefusals counts SKUs on which a request was refused as
	// insufficient although at least that much stock was still there at
	// the end (stock only decreases, so it was there when refused).
	FalseRefusals int64
	// Mismatches counts SKUs whose Stock differs from the backend's value.
	Mismatches int64

	// A Checkout's audit also has these. Per SKU, Initial + Restocked must
	// equal the final stock + Held + Taken, where Held and Taken add up the
	// lines of every order a worker may have applied, as Order reports it
	// once every hold's deadline has passed (so Held must be 0). Oversold
	// and Lost count the per-SKU differences, and the units of orders found
	// open (held or taken) that should be closed (Lost) or closed that
	// should be open (Oversold).
	Restocked, Held, Taken int64
	// Orders counts the orders checked through Order; BadOrders those not
	// found in a state their calls' results allow, or with other lines.
	Orders, BadOrders int64
	// Duplicated is the units orders hold beyond their lines: a retry
	// taken twice.
	Duplicated int64
	// Reconciled counts the calls of Unknown whose outcome was learned: by
	// repeating the call with the same ID, or through Order at the audit.
	Reconciled int64
	// Problems describes the first problem SKUs, for people.
	Problems []string
}

// Sound reports whether the audit found nothing wrong: nothing oversold,
// nothing lost, no request refused while its stock was there.
func (a Audit) Sound() bool {
	return a.Oversold == 0 && a.Lost == 0 && a.FalseRefusals == 0 && a.Duplicated == 0 && a.BadOrders == 0
}

// audit reads the final stock of every SKU and checks it against the tallies.
func (r *run) audit(ctx context.Context, inv stockguard.Inventory, raw func(context.Context, string) (int64, error)) (Audit, error) {
	n := len(r.skus)
	final := make([]int64, n)
	var rawFinal []int64
	if raw != nil {
		rawFinal = make([]int64, n)
	}
	err := parallel(n, func(i int) error {
		v, err := inv.Stock(ctx, r.skus[i])
		if err != nil {
			return fmt.Errorf("Stock(%q): %w", r.skus[i], err)
		}
		final[i] = v
		if raw != nil {
			if rawFinal[i], err = raw(ctx, r.skus[i]); err != nil {
				return fmt.Errorf("reading %q from the backend: %w", r.skus[i], err)
			}
		}
		return nil
	})
	if err != nil {
		return Audit{}, err
	}
	a := Audit{Raw: raw != nil}
	for i := range n {
		s := skuAudit{
			initial: r.initial[i],
			acked:   r.ackedUnits(i),
			unknown: r.unknown[i].Load(),
			refused: r.minRefused[i].Load(),
			final:   final[i],
		}
		truth := final[i]
		if raw != nil {
			s.raw, s.hasRaw = rawFinal[i], true
			truth = rawFinal[i]
		}
		over, lost, falseRefusal, mismatch := s.check()
		a.Initial += s.initial
		a.Acked += s.acked
		a.Final += s.final
		a.RawFinal += s.raw
		a.Gone += s.initial - truth
		a.UnknownUnits += s.unknown
		a.Oversold += over
		a.Lost += lost
		if falseRefusal {
			a.FalseRefusals++
		}
		if mismatch {
			a.Mismatches++
		}
		if (over > 0 || lost > 0 || falseRefusal || mismatch) && len(a.Problems) < maxSamples {
			a.Problems = append(a.Problems, s.describe(r.skus[i], over, lost, falseRefusal))
		}
	}
	for _, wk := range r.workers {
		a.Unknown += wk.counts[0][KindOutcomeUnknown] + wk.counts[1][KindOutcomeUnknown]
	}
	return a, nil
}

// ackedUnits returns the units acknowledged on SKU i, over all workers.
func (r *run) ackedUnits(i int) int64 {
	if r.acked != nil {
		return r.acked[i].Load()
	}
	var n int64
	for _, wk := range r.workers {
		n += wk.acked[i]
	}
	return n
}

// skuAudit holds one SKU's figures.
type skuAudit struct {
	initial, acked, unknown int64
	refused                 int64 // smallest qty refused as insufficient, 0 if none
	final, raw              int64
	hasRaw                  bool
}

// check returns the SKU's oversold and lost units, the worse of the two
// readings, whether a refusal is contradicted by the stock left, and
// whether the readings disagree.
func (s skuAudit) check() (over, lost int64, falseRefusal, mismatch bool) {
	readings := []int64{s.final}
	if s.hasRaw {
		readings = append(readings, s.raw)
		mismatch = s.raw != s.final
	}
	for _, f := range readings {
		gone := s.initial - f
		// No more than the initial stock can legitimately go: units
		// acknowledged beyond that, or beyond what went, were oversold.
		over = max(over, s.acked-min(gone, s.initial))
		lost = max(lost, gone-s.acked-s.unknown)
		if s.refused > 0 && f >= s.refused {
			falseRefusal = true
		}
	}
	return max(over, 0), max(lost, 0), falseRefusal, mismatch
}

func (s skuAudit) describe(sku string, over, lost int64, falseRefusal bool) string {
	msg := fmt.Sprintf("%s: stocked %d, acknowledged %d, final %d via Stock", sku, s.initial, s.acked, s.final)
	if s.hasRaw {
		msg += fmt.Sprintf(", %d in the backend", s.raw)
	}
	if s.unknown > 0 {
		msg += fmt.Sprintf(", %d units of unknown outcome", s.unknown)
	}
	if over > 0 {
		msg += fmt.Sprintf(": OVERSOLD %d", over)
	}
	if lost > 0 {
		msg += fmt.Sprintf(": LOST %d", lost)
	}
	if falseRefusal {
		msg += fmt.Sprintf(": refused a request of %d while that much remained", s.refused)
	}
	if s.hasRaw && s.raw != s.final {
		msg += ": Stock disagrees with the backend"
	}
	return msg
}
