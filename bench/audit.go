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
	// Unresolved counts the calls of Unknown whose outcome the audit could
	// not learn. No fault is injected into a run, so each is a finding: a
	// store that answers "unknown" having done nothing would otherwise hide
	// as many units taken without an acknowledgement. A Decrement has no
	// ID to learn its outcome by; a Checkout learns every order's through
	// Order and repeats every unsettled restock until it answers.
	Unresolved int64
	// Failed says why the audit could not complete, "" when it did: a
	// stock or an order that cannot be read (stock below zero, for one) is
	// a finding, never a pass.
	Failed string
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

// Sound reports whether the audit completed and found nothing wrong:
// nothing oversold, lost or duplicated, no request refused while its stock
// was there, Stock agreeing with the backend, every order as its calls
// allow, and no outcome left unknown.
func (a Audit) Sound() bool {
	return a.Failed == "" && a.Oversold == 0 && a.Lost == 0 && a.FalseRefusals == 0 && a.Duplicated == 0 &&
		a.BadOrders == 0 && a.Mismatches == 0 && a.Unresolved == 0
}

// fail records that the audit could not complete, keeping the first reason.
func (a *Audit) fail(err error) {
	if a.Failed == "" {
		a.Failed = err.Error()
	}
	a.problem("audit incomplete: %v", err)
}

// problem describes a problem for people, up to maxSamples of them.
func (a *Audit) problem(format string, args ...any) {
	if len(a.Problems) < maxSamples {
		a.Problems = append(a.Problems, fmt.Sprintf(format, args...))
	}
}

// audit reads the final stock of every SKU and checks it against the
// tallies. A SKU it cannot read (through Stock or from the backend) fails
// the audit; the other reading, when there is one, is still checked.
func (r *run) audit(ctx context.Context, inv stockguard.Inventory, raw func(context.Context, string) (int64, error)) Audit {
	a := Audit{Raw: raw != nil}
	rd := r.readStock(ctx, inv, raw)
	for i := range r.skus {
		s := skuAudit{
			initial: r.initial[i],
			acked:   r.ackedUnits(i),
			unknown: r.unknown[i].Load(),
			refused: r.minRefused[i].Load(),
		}
		readable := rd.check(&a, i, r.skus[i])
		s.final, s.hasFinal = rd.final[i], rd.finalErr[i] == nil
		s.raw, s.hasRaw = rd.raw[i], raw != nil && rd.rawErr[i] == nil
		truth := s.final
		if s.hasRaw {
			truth = s.raw
		}
		a.Initial += s.initial
		a.Acked += s.acked
		a.UnknownUnits += s.unknown
		if !readable {
			continue
		}
		over, lost, falseRefusal, mismatch := s.check()
		a.Final += s.final
		a.RawFinal += s.raw
		a.Gone += s.initial - truth
		a.Oversold += over
		a.Lost += lost
		if falseRefusal {
			a.FalseRefusals++
		}
		if mismatch {
			a.Mismatches++
		}
		if over > 0 || lost > 0 || falseRefusal || mismatch {
			a.problem("%s", s.describe(r.skus[i], over, lost, falseRefusal))
		}
	}
	for _, wk := range r.workers {
		a.Unknown += wk.counts[0][KindOutcomeUnknown] + wk.counts[1][KindOutcomeUnknown]
	}
	// A Decrement carries no ID: nothing tells what an unknown one did.
	a.Unresolved = a.Unknown
	if a.Unresolved > 0 {
		a.problem("%d requests ended ErrOutcomeUnknown in a run with no fault injected (%d units): each may hide a unit taken without an acknowledgement", a.Unknown, a.UnknownUnits)
	}
	return a
}

// readings are every SKU's stock read through Stock and, when the target
// has a raw reader, from the backend, with the errors of the reads.
type readings struct {
	final, raw       []int64
	finalErr, rawErr []error
}

// readStock reads every SKU's stock through inv and, when raw is set,
// straight from the backend; a failed read is kept as its error.
func (r *run) readStock(ctx context.Context, inv stockguard.Inventory, raw func(context.Context, string) (int64, error)) readings {
	n := len(r.skus)
	rd := readings{final: make([]int64, n), raw: make([]int64, n), finalErr: make([]error, n), rawErr: make([]error, n)}
	parallel(n, func(i int) error {
		rd.final[i], rd.finalErr[i] = inv.Stock(ctx, r.skus[i])
		if raw != nil {
			rd.raw[i], rd.rawErr[i] = raw(ctx, r.skus[i])
		}
		return nil
	})
	return rd
}

// check fails a on SKU i's failed reads and on a reading below zero, and
// reports whether at least one reading is there to check.
func (rd readings) check(a *Audit, i int, sku string) (readable bool) {
	if err := rd.finalErr[i]; err != nil {
		a.fail(fmt.Errorf("Stock(%q): %w", sku, err))
	}
	if err := rd.rawErr[i]; err != nil {
		a.fail(fmt.Errorf("reading %q from the backend: %w", sku, err))
	}
	if rd.rawErr[i] == nil && rd.raw[i] < 0 {
		a.problem("%s: the backend holds %d units: below zero", sku, rd.raw[i])
	}
	return rd.finalErr[i] == nil || rd.rawErr[i] == nil
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
	hasFinal, hasRaw        bool
}

// check returns the SKU's oversold and lost units, the worse of the two
// readings, whether a refusal is contradicted by the stock left, and
// whether the readings disagree.
func (s skuAudit) check() (over, lost int64, falseRefusal, mismatch bool) {
	var readings []int64
	if s.hasFinal {
		readings = append(readings, s.final)
	}
	if s.hasRaw {
		readings = append(readings, s.raw)
		mismatch = s.hasFinal && s.raw != s.final
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
	msg := fmt.Sprintf("%s: stocked %d, acknowledged %d", sku, s.initial, s.acked)
	if s.hasFinal {
		msg += fmt.Sprintf(", final %d via Stock", s.final)
	}
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
	if s.hasRaw && s.hasFinal && s.raw != s.final {
		msg += ": Stock disagrees with the backend"
	}
	return msg
}
