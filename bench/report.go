package bench

import (
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
)

// Row is the flat, serialisable form of a Result, as the JSON and CSV
// reports write it.
type Row struct {
	Strategy       string           `json:"strategy"`
	Counterexample bool             `json:"counterexample"`
	Backend        string           `json:"backend"`
	Workload       string           `json:"workload"`
	Workers        int              `json:"workers"`
	Procs          int              `json:"procs"`     // OS processes the workers ran in
	Instances      int              `json:"instances"` // app instances, in all
	SKUs           int              `json:"skus"`
	Skew           string           `json:"skew"`
	Qty            string           `json:"qty"`
	Load           string           `json:"load"`                   // "closed" or "open"
	OfferedRate    float64          `json:"offered_rate,omitempty"` // open-loop: requests per second scheduled
	ElapsedS       float64          `json:"elapsed_s"`
	Attempts       int64            `json:"attempts"`
	Successes      int64            `json:"successes"`
	Throughput     float64          `json:"throughput"`
	AttemptsPerS   float64          `json:"attempts_per_s"`
	P50Ms          float64          `json:"p50_ms"`
	P90Ms          float64          `json:"p90_ms"`
	P99Ms          float64          `json:"p99_ms"`
	P999Ms         float64          `json:"p999_ms"`
	MaxMs          float64          `json:"max_ms"`
	MeanMs         float64          `json:"mean_ms"`
	Retries        int64            `json:"retries"`
	RetriesPerOp   float64          `json:"retries_per_op"`
	Errors         map[string]int64 `json:"errors"`
	OtherErrors    []string         `json:"other_errors,omitempty"`
	SoldOut        bool             `json:"sold_out"`
	SellOutMs      float64          `json:"sellout_ms"`
	Initial        int64            `json:"initial"`
	Acked          int64            `json:"acked"`
	Gone           int64            `json:"gone"`
	Oversold       int64            `json:"oversold"`
	Lost           int64            `json:"lost"`
	Unknown        int64            `json:"unknown"`
	UnknownUnits   int64            `json:"unknown_units"`
	FalseRefusals  int64            `json:"false_refusals"`
	Mismatches     int64            `json:"mismatches"`
	RawChecked     bool             `json:"raw_checked"`
	Unresolved     int64            `json:"unresolved"`
	AuditFailed    string           `json:"audit_failed,omitempty"`
	Sound          bool             `json:"sound"`
	Interrupted    bool             `json:"interrupted,omitempty"`
	Problems       []string         `json:"problems,omitempty"`
	// Checkout holds a checkout run's order figures; Successes and
	// Throughput count orders there.
	Checkout *CheckoutRow `json:"checkout,omitempty"`
	// Stats holds the target's own figures (Result.Stats).
	Stats map[string]float64 `json:"stats,omitempty"`
	// ServerCPUUsPerOp is the processor time all the measured servers of
	// the run spent together per request, in µs; absent when no server's
	// CPU could be read (ServerCPU says why). ClientCPUUsPerOp is the
	// client processes'.
	ServerCPUUsPerOp *float64 `json:"server_cpu_us_per_op,omitempty"`
	ClientCPUUsPerOp *float64 `json:"client_cpu_us_per_op,omitempty"`
	// ServerCPU is ServerCPUUsPerOp server by server.
	ServerCPU []ServerCPURow `json:"server_cpu,omitempty"`
}

// ServerCPURow is one server's processor time per request.
type ServerCPURow struct {
	Backend string `json:"backend"`
	Addr    string `json:"addr"`
	// UsPerOp is absent when the server's CPU was not read; Error says
	// why.
	UsPerOp *float64 `json:"us_per_op,omitempty"`
	From    string   `json:"from,omitempty"`
	Error   string   `json:"error,omitempty"`
}

// cpuRows returns the CPU fields of a Row.
func cpuRows(r *Result) (server, client *float64, per []ServerCPURow) {
	if v, ok := r.ServerCPUPerOp(); ok {
		server = &v
	}
	if v, ok := r.ClientCPUPerOp(); ok {
		client = &v
	}
	for _, s := range r.ServerCPU {
		row := ServerCPURow{Backend: s.Backend, Addr: s.Addr, From: s.From, Error: s.Err}
		if s.Err == "" && r.Attempts > 0 {
			v := perOp(s.CPU, r.Attempts)
			row.UsPerOp = &v
		}
		per = append(per, row)
	}
	return server, client, per
}

// CheckoutRow is the part of a Row only a Checkout has (see Audit).
type CheckoutRow struct {
	Lines         int64   `json:"lines"`
	LinesPerS     float64 `json:"lines_per_s"`
	Restocked     int64   `json:"restocked"`
	Held          int64   `json:"held"`
	Taken         int64   `json:"taken"`
	OrdersChecked int64   `json:"orders_checked"`
	BadOrders     int64   `json:"bad_orders"`
	Duplicated    int64   `json:"duplicated"`
	Reconciled    int64   `json:"reconciled"`
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// NewRow flattens r.
func NewRow(r *Result) Row {
	w, a := r.Workload, r.Audit
	var co *CheckoutRow
	if w.Shape == Checkout {
		co = &CheckoutRow{
			Lines: r.Lines, LinesPerS: r.LineRate, Restocked: a.Restocked, Held: a.Held, Taken: a.Taken,
			OrdersChecked: a.Orders, BadOrders: a.BadOrders, Duplicated: a.Duplicated, Reconciled: a.Reconciled,
		}
	}
	serverCPU, clientCPU, perServer := cpuRows(r)
	return Row{
		ServerCPUUsPerOp: serverCPU, ClientCPUUsPerOp: clientCPU, ServerCPU: perServer,
		Checkout: co,
		Strategy: r.Target, Counterexample: r.Counterexample, Backend: needsText(r.Needs),
		Workload: w.Shape.String(), Workers: w.Workers, Procs: max(r.Procs, 1), Instances: min(w.Instances, w.Workers),
		SKUs: w.SKUs, Skew: w.Skew.String(), Qty: w.Qty(), Load: w.loop(), OfferedRate: w.Rate,
		ElapsedS: r.Elapsed.Seconds(), Attempts: r.Attempts, Successes: r.Successes,
		Throughput: r.Throughput, AttemptsPerS: r.AttemptRate,
		P50Ms: ms(r.Latency.P50), P90Ms: ms(r.Latency.P90), P99Ms: ms(r.Latency.P99),
		P999Ms: ms(r.Latency.P999), MaxMs: ms(r.Latency.Max), MeanMs: ms(r.Latency.Mean),
		Retries: r.Retries, RetriesPerOp: r.RetriesPerOp,
		Errors: r.Errors, OtherErrors: r.OtherErrors,
		SoldOut: r.SoldOut, SellOutMs: ms(r.SellOut),
		Initial: a.Initial, Acked: a.Acked, Gone: a.Gone,
		Oversold: a.Oversold, Lost: a.Lost, Unknown: a.Unknown, UnknownUnits: a.UnknownUnits,
		FalseRefusals: a.FalseRefusals, Mismatches: a.Mismatches, RawChecked: a.Raw,
		Unresolved: a.Unresolved, AuditFailed: a.Failed,
		Sound: r.Sound(), Interrupted: r.Interrupted, Problems: a.Problems,
		Stats: r.Stats,
	}
}

// Report is the JSON document WriteJSON writes: what was run, where and
// with what, then one Row per result.
type Report struct {
	Meta    Meta  `json:"meta"`
	Results []Row `json:"results"`
}

// WriteJSON writes m and the results as a Report.
func WriteJSON(w io.Writer, m Meta, results []*Result) error {
	rep := Report{Meta: m, Results: make([]Row, len(results))}
	for i, r := range results {
		rep.Results[i] = NewRow(r)
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(rep)
}

var csvHeader = []string{
	"strategy", "counterexample", "backend", "workload", "workers", "instances", "skus", "skew", "qty",
	"elapsed_s", "attempts", "successes", "throughput", "attempts_per_s",
	"p50_ms", "p90_ms", "p99_ms", "p999_ms", "max_ms", "mean_ms",
	"retries", "retries_per_op", "errors", "sold_out", "sellout_ms",
	"initial", "acked", "gone", "oversold", "lost", "unknown", "unknown_units",
	"false_refusals", "mismatches", "raw_checked", "sound", "load", "offered_rate", "procs",
	"server_cpu_us_per_op", "client_cpu_us_per_op",
}

// csvCheckout are the columns added when a result is a Checkout.
var csvCheckout = []string{
	"lines", "lines_per_s", "restocked", "held", "taken", "orders_checked", "bad_orders", "duplicated", "reconciled",
}

// WriteCSV writes the results as CSV with a header line; errors are one
// field of "kind=count" pairs separated by semicolons. Checkout results add
// the columns of CheckoutRow, results with their targets' own figures a
// "stats" column of "name=value" pairs likewise.
func WriteCSV(w io.Writer, results []*Result) error {
	cw := csv.NewWriter(w)
	checkout, stats := hasCheckout(results), hasStats(results)
	header := csvHeader
	if checkout {
		header = append(slices.Clone(csvHeader), csvCheckout...)
	}
	if stats {
		header = append(slices.Clone(header), "stats")
	}
	if err := cw.Write(header); err != nil {
		return err
	}
	f := func(v float64) string { return strconv.FormatFloat(v, 'f', -1, 64) }
	d := func(v int64) string { return strconv.FormatInt(v, 10) }
	for _, r := range results {
		x := NewRow(r)
		var errs []string
		for _, k := range slices.Sorted(maps.Keys(x.Errors)) {
			errs = append(errs, k+"="+d(x.Errors[k]))
		}
		rec := []string{
			x.Strategy, strconv.FormatBool(x.Counterexample), x.Backend, x.Workload, strconv.Itoa(x.Workers), strconv.Itoa(x.Instances),
			strconv.Itoa(x.SKUs), x.Skew, x.Qty,
			f(x.ElapsedS), d(x.Attempts), d(x.Successes), f(x.Throughput), f(x.AttemptsPerS),
			f(x.P50Ms), f(x.P90Ms), f(x.P99Ms), f(x.P999Ms), f(x.MaxMs), f(x.MeanMs),
			d(x.Retries), f(x.RetriesPerOp), strings.Join(errs, ";"), strconv.FormatBool(x.SoldOut), f(x.SellOutMs),
			d(x.Initial), d(x.Acked), d(x.Gone), d(x.Oversold), d(x.Lost), d(x.Unknown), d(x.UnknownUnits),
			d(x.FalseRefusals), d(x.Mismatches), strconv.FormatBool(x.RawChecked), strconv.FormatBool(x.Sound),
			x.Load, f(x.OfferedRate), strconv.Itoa(x.Procs), optional(x.ServerCPUUsPerOp), optional(x.ClientCPUUsPerOp),
		}
		if c := x.Checkout; c != nil {
			rec = append(rec, d(c.Lines), f(c.LinesPerS), d(c.Restocked), d(c.Held), d(c.Taken),
				d(c.OrdersChecked), d(c.BadOrders), d(c.Duplicated), d(c.Reconciled))
		} else if checkout {
			rec = append(rec, make([]string, len(csvCheckout))...)
		}
		if stats {
			var kv []string
			for _, k := range slices.Sorted(maps.Keys(x.Stats)) {
				kv = append(kv, k+"="+f(x.Stats[k]))
			}
			rec = append(rec, strings.Join(kv, ";"))
		}
		if err := cw.Write(rec); err != nil {
			return err
		}
	}
	cw.Flush()
	return cw.Error()
}

// optional formats a figure that may be absent: "" then.
func optional(v *float64) string {
	if v == nil {
		return ""
	}
	return strconv.FormatFloat(*v, 'f', -1, 64)
}

// WriteTable writes the results as an aligned text table for people,
// followed by the audit's verdict: every unsound strategy named loudly with
// its problems, the counterexamples caught, and any error outside the
// contract.
func WriteTable(w io.Writer, results []*Result) error {
	flash := slices.ContainsFunc(results, func(r *Result) bool { return r.Workload.Shape == Flash })
	open := slices.ContainsFunc(results, func(r *Result) bool { return r.Workload.Rate > 0 })
	checkout := hasCheckout(results)
	procs := slices.ContainsFunc(results, func(r *Result) bool { return r.Procs > 1 })
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	head := "STRATEGY\tWORKERS\tSKUS\tDECR/S\tATTEMPTS/S\tP50 ms\tP90 ms\tP99 ms\tP99.9 ms\tMAX ms\tRETRIES/OP\t"
	if checkout {
		head = "STRATEGY\tWORKERS\tSKUS\tORDERS/S\tLINES/S\tATTEMPTS/S\tP50 ms\tP90 ms\tP99 ms\tP99.9 ms\tMAX ms\tRETRIES/OP\t"
	}
	if open {
		head = strings.Replace(head, "SKUS\t", "SKUS\tOFFERED/S\t", 1)
	}
	if procs {
		head = strings.Replace(head, "WORKERS\t", "WORKERS\tPROCS\t", 1)
	}
	cpu := hasCPU(results)
	if cpu {
		head += "SERVER CPU µs/op\tCLIENT CPU µs/op\t"
	}
	if flash {
		head += "SOLD OUT\t"
	}
	fmt.Fprintln(tw, pad("STRATEGY", results)+head[len("STRATEGY"):]+"ERRORS\tAUDIT\t")
	for _, r := range results {
		name := r.Target
		if r.Counterexample {
			name += " [broken]"
		}
		name = pad(name, results)
		rate := count(r.Throughput)
		if checkout {
			rate += "\t" + count(r.LineRate)
		}
		if open {
			rate = offeredText(r.Workload.Rate) + "\t" + rate
		}
		workers := strconv.Itoa(r.Workload.Workers)
		if procs {
			workers += "\t" + strconv.Itoa(max(r.Procs, 1))
		}
		line := fmt.Sprintf("%s\t%s\t%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%.2f\t", name, workers, r.Workload.SKUs,
			rate, count(r.AttemptRate),
			millis(r.Latency.P50), millis(r.Latency.P90), millis(r.Latency.P99), millis(r.Latency.P999), millis(r.Latency.Max),
			r.RetriesPerOp)
		if cpu {
			line += cpuText(r.ServerCPUPerOp()) + "\t" + cpuText(r.ClientCPUPerOp()) + "\t"
		}
		if flash {
			line += sellOut(r) + "\t"
		}
		fmt.Fprintln(tw, line+errorSummary(r.Errors)+"\t"+verdict(r)+"\t")
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if err := writeStats(w, results); err != nil {
		return err
	}
	if cpu {
		if err := writeCPU(w, results); err != nil {
			return err
		}
	}
	if checkout {
		if err := writeCheckoutLegend(w); err != nil {
			return err
		}
		return writeVerdict(w, results)
	}
	if err := writeLegend(w, flash, open); err != nil {
		return err
	}
	return writeVerdict(w, results)
}

// writeLegend says under the table what its rate columns count, and how
// they differ from the audit's figures.
func writeLegend(w io.Writer, flash, open bool) error {
	legend := "\nDECR/S: successful requests per second (\"successes\" in JSON); each took its qty units, which the audit counts as\n" +
		"acknowledged (\"acked\"). ATTEMPTS/S: every request per second, refused and failed ones included; ERRORS: those by kind.\n"
	if flash {
		legend += "SOLD OUT: time from the start of measurement to the last unit sold; the run ends once every SKU refused for lack\n" +
			"of stock. In a flash run DECR/S is over the time to sell out, ATTEMPTS/S over the whole measured window.\n"
	}
	if open {
		legend += openLegend
	}
	_, err := io.WriteString(w, legend)
	return err
}

func hasCPU(results []*Result) bool {
	return slices.ContainsFunc(results, func(r *Result) bool { return r.ClientCPU > 0 || r.ServerCPU != nil })
}

// cpuText is a CPU column's cell: µs with one decimal, "-" when not
// measured.
func cpuText(v float64, ok bool) string {
	if !ok {
		return "-"
	}
	return strconv.FormatFloat(v, 'f', 1, 64)
}

// writeCPU says under the table what the CPU columns count and, where a
// run measured more than one server or could not read one, each server's
// share.
func writeCPU(w io.Writer, results []*Result) error {
	var b strings.Builder
	b.WriteString("\nSERVER CPU µs/op: processor time (user + system) the servers of the strategy's backends spent together over the\n" +
		"measured window, per request: a server this run started, its processes (/proc); any Redis or Valkey, INFO cpu (its\n" +
		"other clients' work included); any other server is not measured. CLIENT CPU µs/op: the client processes' (workers,\n" +
		"strategy client code, harness, and anything else in them: a tiered consumer, -rtt's forwarders). A -procs run\n" +
		"adds up its worker processes' and measures no server.\n")
	for _, r := range results {
		if len(r.ServerCPU) < 2 && !slices.ContainsFunc(r.ServerCPU, func(s ServerCPU) bool { return s.Err != "" }) {
			continue
		}
		var parts []string
		for _, s := range r.ServerCPU {
			if s.Err != "" {
				parts = append(parts, fmt.Sprintf("%s at %s %s", s.Backend, s.Addr, s.Err))
				continue
			}
			parts = append(parts, fmt.Sprintf("%s at %s %s µs/op (%s)", s.Backend, s.Addr, cpuText(perOp(s.CPU, r.Attempts), r.Attempts > 0), s.From))
		}
		fmt.Fprintf(&b, "%s at %d workers: %s\n", r.Target, r.Workload.Workers, strings.Join(parts, "; "))
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func hasStats(results []*Result) bool {
	return slices.ContainsFunc(results, func(r *Result) bool { return len(r.Stats) > 0 })
}

// writeStats writes under the table, one line per result that has them,
// the target's own figures (a tiered target's lag and backlog).
func writeStats(w io.Writer, results []*Result) error {
	if !hasStats(results) {
		return nil
	}
	var b strings.Builder
	b.WriteString("\n")
	for _, r := range results {
		if len(r.Stats) == 0 {
			continue
		}
		var kv []string
		for _, k := range slices.Sorted(maps.Keys(r.Stats)) {
			kv = append(kv, k+" "+statText(r.Stats[k]))
		}
		fmt.Fprintf(&b, "%s at %d workers: %s\n", r.Target, r.Workload.Workers, strings.Join(kv, ", "))
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// statText formats a figure for people: whole numbers and those of 100 or
// more as counts, smaller ones with two decimals.
func statText(v float64) string {
	if v == float64(int64(v)) || v >= 100 {
		return count(v)
	}
	return strconv.FormatFloat(v, 'f', 2, 64)
}

func hasCheckout(results []*Result) bool {
	return slices.ContainsFunc(results, func(r *Result) bool { return r.Workload.Shape == Checkout })
}

// writeCheckoutLegend is writeLegend for a checkout.
func writeCheckoutLegend(w io.Writer) error {
	_, err := io.WriteString(w, "\nORDERS/S: acknowledged orders (Take or Hold) per second; LINES/S: their lines per second. ATTEMPTS/S: every\n"+
		"order placed per second, refused ones included; latencies are the order call's (its follow-up Confirm or Return and\n"+
		"restocks are not timed). AUDIT: per SKU, initial + restocked == stock + held + taken, held and taken as Order reports\n"+
		"every order after the last hold's deadline; every order in the state its calls' results allow, nothing duplicated.\n")
	return err
}

func writeVerdict(w io.Writer, results []*Result) error {
	var b strings.Builder
	var unsound, caught, counter []string
	for _, r := range results {
		if r.Counterexample && !slices.Contains(counter, r.Target) {
			counter = append(counter, r.Target)
		}
		if r.Sound() {
			continue
		}
		if r.Counterexample {
			if !slices.Contains(caught, r.Target) {
				caught = append(caught, r.Target)
			}
			continue
		}
		if !slices.Contains(unsound, r.Target) {
			unsound = append(unsound, r.Target)
		}
		where := fmt.Sprintf("%d workers", r.Workload.Workers)
		if r.Procs > 1 {
			where += fmt.Sprintf(" in %d processes", r.Procs)
		}
		fmt.Fprintf(&b, "\n!!! UNSOUND: %s at %s — oversold %d, lost %d, false refusals %d (of %d units acknowledged)\n",
			r.Target, where, r.Audit.Oversold, r.Audit.Lost, r.Audit.FalseRefusals, r.Audit.Acked)
		if a := r.Audit; a.Failed != "" {
			fmt.Fprintf(&b, "!!!   the audit could not complete: %s\n", a.Failed)
		}
		if a := r.Audit; a.Duplicated > 0 || a.BadOrders > 0 {
			fmt.Fprintf(&b, "!!!   duplicated %d units, %d of %d orders not in their expected state\n", a.Duplicated, a.BadOrders, a.Orders)
		}
		for _, p := range r.Audit.Problems {
			fmt.Fprintf(&b, "!!!   %s\n", p)
		}
	}
	b.WriteString("\n")
	if len(unsound) == 0 {
		b.WriteString("audit: every strategy sound — units acknowledged match the stock gone, read through Stock and straight from the backend.\n")
	} else {
		fmt.Fprintf(&b, "audit: %d UNSOUND result(s) — do not use: %s\n", len(unsound), strings.Join(unsound, ", "))
	}
	if len(counter) > 0 {
		var missed []string
		for _, c := range counter {
			if !slices.Contains(caught, c) {
				missed = append(missed, c)
			}
		}
		fmt.Fprintf(&b, "counterexamples: %d of %d caught by the audit", len(caught), len(counter))
		if len(missed) > 0 {
			fmt.Fprintf(&b, "; NOT caught in this run: %s", strings.Join(missed, ", "))
		}
		b.WriteString(".\n")
	}
	for _, r := range results {
		if n := r.Errors["other"]; n > 0 {
			fmt.Fprintf(&b, "errors outside the contract: %s at %d workers: %d, e.g. %q\n", r.Target, r.Workload.Workers, n, r.OtherErrors)
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// pad left-aligns a first-column cell in the right-aligned table by
// padding it to the longest name.
func pad(s string, results []*Result) string {
	width := len("STRATEGY")
	for _, r := range results {
		n := len(r.Target)
		if r.Counterexample {
			n += len(" [broken]")
		}
		width = max(width, n)
	}
	return s + strings.Repeat(" ", width-len(s))
}

// verdict is the AUDIT column.
func verdict(r *Result) string {
	a := r.Audit
	if r.Sound() && r.Counterexample {
		if r.Workload.Workers == 1 {
			return "not caught (1 worker: no race)"
		}
		return "NOT CAUGHT"
	}
	if r.Sound() {
		s := "ok"
		if a.Unknown > 0 {
			s += fmt.Sprintf(" (%d unknown)", a.Unknown)
		}
		if r.Interrupted {
			s += " (interrupted)"
		}
		return s
	}
	var parts []string
	if a.Oversold > 0 {
		parts = append(parts, fmt.Sprintf("oversold %d", a.Oversold))
	}
	if a.Lost > 0 {
		parts = append(parts, fmt.Sprintf("lost %d", a.Lost))
	}
	if a.FalseRefusals > 0 {
		parts = append(parts, fmt.Sprintf("false refusals %d", a.FalseRefusals))
	}
	if a.Duplicated > 0 {
		parts = append(parts, fmt.Sprintf("duplicated %d", a.Duplicated))
	}
	if a.BadOrders > 0 {
		parts = append(parts, fmt.Sprintf("bad orders %d", a.BadOrders))
	}
	if a.Mismatches > 0 {
		parts = append(parts, fmt.Sprintf("Stock ≠ backend on %d SKUs", a.Mismatches))
	}
	if a.Unresolved > 0 {
		parts = append(parts, fmt.Sprintf("unknown %d", a.Unresolved))
	}
	if a.Failed != "" {
		parts = append([]string{"audit incomplete"}, parts...)
	}
	label := "UNSOUND"
	if a.Failed != "" && !r.Counterexample {
		label = "FAILED"
	}
	if r.Counterexample {
		label = "CAUGHT"
	}
	return label + ": " + strings.Join(parts, ", ")
}

func sellOut(r *Result) string {
	if !r.SoldOut {
		return "no"
	}
	return millis(r.SellOut) + " ms"
}

func errorSummary(errs map[string]int64) string {
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(errs)) {
		parts = append(parts, fmt.Sprintf("%s %s", k, count(float64(errs[k]))))
	}
	if len(parts) == 0 {
		return "-"
	}
	return strings.Join(parts, ", ")
}

// count formats a non-negative number with thousands separators, no decimals.
func count(v float64) string {
	s := strconv.FormatInt(int64(v+0.5), 10)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}

// millis formats a duration in milliseconds with three significant digits.
func millis(d time.Duration) string {
	v := ms(d)
	switch {
	case v == 0:
		return "0"
	case v < 1:
		return strconv.FormatFloat(v, 'f', 3, 64)
	case v < 10:
		return strconv.FormatFloat(v, 'f', 2, 64)
	case v < 100:
		return strconv.FormatFloat(v, 'f', 1, 64)
	}
	return strconv.FormatFloat(v, 'f', 0, 64)
}
