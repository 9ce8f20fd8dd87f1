package faults

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/stockguard/stockguard/bench"
)

// Report is what one run of a target through a fault found.
type Report struct {
	Target string `json:"strategy"`
	Fault  string `json:"fault"`
	// Counterexample marks a run expected to lose units: a known-broken
	// pattern, or a strategy on replicas that acknowledges what only the
	// master has, under a failover. Its losses are shown, not failures.
	Counterexample bool `json:"counterexample"`
	// Orders is set when the target implements stockguard.Orders: half the
	// buyers took orders, whose unknown outcomes were reconciled.
	Orders bool `json:"orders"`
	Buyers int  `json:"buyers"`
	// Injected counts the fault's strikes (cuts, kills, pauses…).
	Injected int `json:"injected"`
	// FaultStart and FaultEnd bound the fault, Elapsed the run, all since
	// the run's start.
	FaultStart time.Duration `json:"fault_start_ns"`
	FaultEnd   time.Duration `json:"fault_end_ns"`
	Elapsed    time.Duration `json:"elapsed_ns"`

	// Ops counts calls; Kinds counts them by outcome (bench.Kind names).
	Ops   int64            `json:"ops"`
	Kinds map[string]int64 `json:"kinds"`
	// Unknown counts calls that ended ErrOutcomeUnknown. UnknownOrders of
	// them were Takes, Reconciled of those were resolved through Order,
	// ReconciledApplied of those had been applied. UnknownUnits is the
	// units of the others (Decrements), which the audit can only bound.
	Unknown           int64 `json:"unknown"`
	UnknownOrders     int64 `json:"unknown_orders"`
	Reconciled        int64 `json:"reconciled"`
	ReconciledApplied int64 `json:"reconciled_applied"`
	UnknownUnits      int64 `json:"unknown_units"`

	// Initial is the stock put on the SKUs, Acked the units acknowledged
	// (reconciled orders found applied included), Gone the stock gone as
	// the backend holds it.
	Initial int64 `json:"initial"`
	Acked   int64 `json:"acked"`
	Gone    int64 `json:"gone"`
	// Oversold is units acknowledged beyond the stock gone; Lost the stock
	// gone beyond what was acknowledged and the units of unknown
	// Decrements; Duplicated the units an order holds beyond its lines.
	Oversold   int64 `json:"oversold"`
	Lost       int64 `json:"lost"`
	Duplicated int64 `json:"duplicated"`
	// Forgotten counts acknowledged orders that Order, after the run, does
	// not know: under a failover every acknowledged order is checked.
	Forgotten int64 `json:"forgotten_orders"`
	// Recorded counts the orders read back from the store of record behind
	// the front, for a target of two tiers (tiered-*): every acknowledged
	// one, each missing one counted in Forgotten.
	Recorded int64 `json:"recorded_orders,omitempty"`
	// Stats holds the target's own figures after the run (bench.Store.Stats:
	// a tiered target's lag, its backlog's peak, the back's rate).
	Stats map[string]float64 `json:"stats,omitempty"`
	// Locks counts the locks obtained beside the buyers under a fault of
	// replicas; ReusedTokens the fencing tokens among them handed out
	// more than once.
	Locks        int64 `json:"locks,omitempty"`
	ReusedTokens int64 `json:"reused_tokens"`

	// Promotion is, for a fault of replicas, the longest time from a
	// failover's strike until the Sentinels agreed on a new master; Usable
	// until the new master acknowledged a take of every SKU (each lock
	// usable again). Zero for other faults.
	Promotion time.Duration `json:"promotion_ns,omitempty"`
	Usable    time.Duration `json:"usable_ns,omitempty"`

	// Baseline is calls answered (acknowledged or refused as
	// insufficient) per second before the fault; Dip the lowest 100 ms
	// rate during it, as a share of Baseline; Outage the longest time
	// without an answer; Recovery how long after the fault ended (for a
	// restart: after the server was started again) the rate was back at
	// half the baseline, -1 when it never was or there was no baseline.
	Baseline float64       `json:"baseline_per_s"`
	Dip      float64       `json:"dip"`
	Outage   time.Duration `json:"outage_ns"`
	Recovery time.Duration `json:"recovery_ns"`

	// Problems describes everything found wrong, the first few of each
	// kind; Goroutines the goroutines left after Close, when some were.
	Problems   []string `json:"problems"`
	Goroutines string   `json:"goroutines,omitempty"`
}

// maxProblems bounds the problems kept per report.
const maxProblems = 20

func (r *Report) problem(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	if len(r.Problems) < maxProblems && !slices.Contains(r.Problems, msg) {
		r.Problems = append(r.Problems, msg)
	}
}

// Sound reports whether no unit was oversold, lost or duplicated and no
// acknowledged order forgotten.
func (r *Report) Sound() bool {
	return r.Oversold == 0 && r.Lost == 0 && r.Duplicated == 0 && r.Forgotten == 0 && r.ReusedTokens == 0
}

// OK reports whether the run found nothing wrong at all: sound, only
// contract errors, every unknown order reconciled, nothing left running.
func (r *Report) OK() bool { return r.Sound() && len(r.Problems) == 0 }

// Audit reads "ok", or says what broke.
func (r *Report) Audit() string {
	switch {
	case !r.Sound() && r.Counterexample:
		return "loses as expected: " + r.losses()
	case !r.Sound():
		return "UNSOUND: " + r.losses()
	case !r.OK():
		return fmt.Sprintf("FAILED: %d problems", len(r.Problems))
	}
	return "ok"
}

func (r *Report) losses() string {
	return fmt.Sprintf("oversold %d, lost %d, duplicated %d, forgotten orders %d, reused tokens %d",
		r.Oversold, r.Lost, r.Duplicated, r.Forgotten, r.ReusedTokens)
}

// errorKinds are the error columns of the table, in bench.Kind order.
var errorKinds = []bench.Kind{bench.KindContention, bench.KindUnavailable, bench.KindCanceled}

// WriteTable writes one row per report and, under the table, each
// report's problems.
func WriteTable(w io.Writer, reps []*Report) error {
	tw := tabwriter.NewWriter(w, 2, 8, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "STRATEGY\tFAULT\tSTRUCK\tCALLS\tOK\tSOLD OUT\tBUSY\tUNAVAIL\tCTX\tUNKNOWN\tRECONCILED\tBASE/S\tDIP\tOUTAGE\tRECOVERY\tPROMOTED/USABLE\tAUDIT\t")
	for _, r := range reps {
		rec := "-"
		if r.Unknown > 0 {
			switch {
			case r.Orders:
				rec = fmt.Sprintf("%d/%d takes", r.Reconciled, r.UnknownOrders)
			default:
				rec = "bounded"
			}
			if r.Orders && r.Unknown > r.UnknownOrders {
				rec += fmt.Sprintf(" +%d bounded", r.Unknown-r.UnknownOrders)
			}
		}
		recovery := "never"
		if r.Baseline == 0 {
			recovery = "-"
		} else if r.Recovery >= 0 {
			recovery = r.Recovery.Round(10 * time.Millisecond).String()
		}
		row := []string{r.Target, r.Fault, fmt.Sprint(r.Injected), fmt.Sprint(r.Ops),
			fmt.Sprint(r.Kinds[bench.KindOK.String()]), fmt.Sprint(r.Kinds[bench.KindInsufficient.String()])}
		for _, k := range errorKinds {
			row = append(row, fmt.Sprint(r.Kinds[k.String()]))
		}
		failover := "-"
		if r.Promotion > 0 {
			failover = r.Promotion.Round(10*time.Millisecond).String() + "/" + r.Usable.Round(10*time.Millisecond).String()
		}
		row = append(row, fmt.Sprint(r.Unknown), rec, fmt.Sprintf("%.0f", r.Baseline),
			fmt.Sprintf("%.0f%%", 100*r.Dip), r.Outage.String(), recovery, failover, r.Audit())
		fmt.Fprintln(tw, strings.Join(row, "\t")+"\t")
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(w, "\nSTRUCK: times the fault struck. SOLD OUT: ErrInsufficientStock. BUSY: ErrContention. UNAVAIL: ErrUnavailable.")
	fmt.Fprintln(w, "CTX: the call's own deadline (nothing applied). UNKNOWN: ErrOutcomeUnknown; an Orders target's takes are reconciled")
	fmt.Fprintln(w, "through Order, Decrements bounded (acked ≤ gone ≤ acked + unknown). BASE/S: calls answered per second before the")
	fmt.Fprintln(w, "fault; DIP: lowest 100ms rate during it; OUTAGE: longest time without an answer; RECOVERY: from the fault's end")
	fmt.Fprintln(w, "(a restart: the server started again; a failover: the master's loss) to half the base rate. PROMOTED/USABLE: the")
	fmt.Fprintln(w, "longest time from a failover's strike to the Sentinels' new master, and to a take of every SKU acknowledged by it.")
	fmt.Fprintln(w, "A strategy on replicas without a replica's acknowledgement \"loses as expected\" under a failover: shown, not failed.")
	for _, r := range reps {
		if r.Recorded > 0 || len(r.Stats) > 0 {
			kv := []string{fmt.Sprintf("%d orders read back from the store of record", r.Recorded)}
			for _, k := range slices.Sorted(maps.Keys(r.Stats)) {
				kv = append(kv, fmt.Sprintf("%s %.6g", k, r.Stats[k]))
			}
			fmt.Fprintf(w, "%s under %s: %s\n", r.Target, r.Fault, strings.Join(kv, ", "))
		}
	}
	for _, r := range reps {
		for _, p := range r.Problems {
			fmt.Fprintf(w, "%s under %s: %s\n", r.Target, r.Fault, p)
		}
	}
	_, err := fmt.Fprintln(w, "\n"+Verdict(reps))
	return err
}

// Verdict sums the runs up in one line: every run sound and clean, or
// which were not.
func Verdict(reps []*Report) string {
	var unsound, failed []string
	for _, r := range reps {
		switch {
		case !r.Sound():
			unsound = append(unsound, r.Target+" under "+r.Fault)
		case !r.OK():
			failed = append(failed, r.Target+" under "+r.Fault)
		}
	}
	switch {
	case len(reps) == 0:
		return "audit: no run completed."
	case len(unsound) > 0:
		return fmt.Sprintf("audit: %d of %d runs UNSOUND (units oversold, lost or duplicated): %s", len(unsound), len(reps), strings.Join(unsound, ", "))
	case len(failed) > 0:
		return fmt.Sprintf("audit: every run sound, but %d of %d had problems (listed above): %s", len(failed), len(reps), strings.Join(failed, ", "))
	}
	runs := fmt.Sprintf("all %d runs", len(reps))
	if len(reps) == 1 {
		runs = "the run"
	}
	return "audit: " + runs + " sound — nothing oversold, lost or duplicated; every error a contract error; nothing left running."
}
