package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/stockguard/stockguard/bench"
)

// Exit codes.
const (
	exitOK       = 0
	exitError    = 1
	exitUsage    = 2
	exitUnsound  = 3
	defaultPlot  = "stockbench.svg"
	usageSummary = `usage: stockbench [flags]

Runs stock strategies side by side on MySQL/MariaDB, PostgreSQL and Redis
(TiDB, Valkey, Sentinel and Cluster when named), audits every run (units
acknowledged must equal the stock gone) and prints a table. With no flags:
every strategy at 1, 8 and 64 workers on one hot SKU, a table on stdout and a
chart in stockbench.svg. Each backend is opened only when a chosen strategy
needs it (see Backends). -list says what each strategy does.

Exit status: 0 all sound, 1 error, 2 bad usage, 3 a strategy was unsound.
go run reports every failure as exit status 1; for the real one, build and
run: go build -o stockbench ./cmd/stockbench && ./stockbench

Flags:
`
)

// config is the parsed command line.
type config struct {
	skipped []string // targets left out before the run, and why
	targets []bench.Target
	// listed says the targets were named with -strategies: every backend
	// they need must open (see bench.Target.IfReachable).
	listed  bool
	workers []int
	// procs are the numbers of worker processes to run each worker count
	// in (-procs); 1 runs the workers in this process.
	procs []int
	// claimIdle is how long a consumer process's unacknowledged entries
	// wait before another claims them, in -procs runs of tiered targets
	// (-claim-idle); 0 is tiered's default.
	claimIdle time.Duration
	workload  bench.Workload
	// openers open each backend's servers as its flags say.
	openers map[string]bench.Opener
	format  string
	plot    string
	// rates is the load of each run per strategy and worker count
	// (-rate): one closed-loop run unless open-loop rates are asked for.
	rates []rateSpec
	// slo, when set, bounds p99 for the highest-rate summary (-slo).
	slo time.Duration
	// faults, when set, makes the run a fault run (-faults, faults.go).
	faults faultConfig
	// rtt is the network round trip put between the clients and every
	// server (-rtt); 0 for loopback.
	rtt time.Duration
}

// usageError is a command line that cannot run; it exits with status 2.
type usageError struct{ msg string }

func (e usageError) Error() string { return e.msg }

func usagef(format string, args ...any) error { return usageError{fmt.Sprintf(format, args...)} }

// parse reads the command line. It returns flag.ErrHelp for -h, having
// written the help to stdout (asked for, it is the output), and a
// usageError for anything it cannot run, having written nothing: the
// caller reports it in a line, not under the whole help.
func parse(args []string, e env, stdout io.Writer) (config, error) {
	fs := flag.NewFlagSet("stockbench", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	// help is short enough to read: a line or two per flag, the targets
	// by name; -list describes them.
	help := func() {
		fmt.Fprint(stdout, usageSummary)
		printFlags(stdout, fs)
		var backends []string
		for _, b := range e.backends {
			backends = append(backends, b.Name)
		}
		fmt.Fprintf(stdout, "\nBackends (started concurrently, only those the chosen strategies need; each from its flag,\nelse its STOCKGUARD_* variable, else a private server or, built with -tags docker, a container;\n-list says which):\n")
		wrap(stdout, "", strings.Join(backends, ", "))
		fmt.Fprintf(stdout, "\nStrategies:\n")
		wrap(stdout, "", strings.Join(names(e.strategies), ", "))
		fmt.Fprintf(stdout, "\nCounterexamples (known broken, only with -counterexamples):\n")
		wrap(stdout, "", strings.Join(names(e.counterexamples), ", "))
	}
	list := func() {
		for _, b := range e.backends {
			fmt.Fprintf(stdout, "%-30s %s\n", b.Name, b.About)
		}
		for _, group := range [][]bench.Target{e.strategies, e.counterexamples} {
			for _, t := range group {
				fmt.Fprintf(stdout, "%-30s %s (%s)\n", t.Name, t.About, strings.Join(t.Needs, "+"))
			}
		}
	}
	def := bench.DefaultWorkload()
	var (
		strategies = fs.String("strategies", "", "comma-separated strategy names, * matching any part of a name (tidb-*)\n"+
			"(default: all strategies but those on request, the ones on other engines)")
		workers    = fs.String("workers", "1,8,64", "comma-separated worker counts; one run per strategy and count")
		skus       = fs.Int("skus", def.SKUs, "number of SKUs")
		skew       = fs.String("skew", def.Skew.String(), "how requests spread over SKUs: uniform, zipf or zipf:S (S > 1)")
		stock      = fs.Int64("stock", 0, "initial stock per SKU (default: 10^12 for steady, 5000 for flash)")
		qty        = fs.String("qty", def.Qty(), "units per request: N or MIN-MAX")
		duration   = fs.Duration("duration", def.Duration, "measured time per run")
		ops        = fs.Int64("ops", 0, "end each run after this many measured requests instead (-duration still caps it when set explicitly)")
		warmup     = fs.Duration("warmup", def.Warmup, "unmeasured warm-up per run")
		drain      = fs.Int("drain", def.Drain, "steady: each worker's first requests, for 1, 2, 3, 1… units of a SKU stocked with this many\nunits per worker, so that every run sells a SKU out (0: none)")
		instances  = fs.Int("instances", def.Instances, "app instances the workers are spread over (each builds its own strategy value)")
		shape      = fs.String("workload", def.Shape.String(), "steady (stock never runs out), flash (stock ≪ demand: time to sell out) or checkout (whole orders, on strategies implementing stockguard.Orders)")
		lines      = fs.Int("lines", def.Orders.Lines, "checkout: most lines per order (1…lines, distinct SKUs by -skew)")
		holdShare  = fs.Float64("hold-share", def.Orders.HoldShare, "checkout: share of orders held (a third confirmed, a third returned, the rest left to expire)")
		holdTTL    = fs.Duration("hold-ttl", def.Orders.HoldTTL, "checkout: how long a hold lasts unless confirmed")
		retShare   = fs.Float64("return-share", def.Orders.ReturnShare, "checkout: share of taken orders returned afterwards")
		restShare  = fs.Float64("restock-share", def.Orders.RestockShare, "checkout: share of operations that restock a SKU")
		shortShare = fs.Float64("short-share", def.Orders.ShortShare, "checkout: share of carts of 2+ lines ending with a sold-out SKU (must be refused whole)")
		counter    = fs.Bool("counterexamples", false, "also run the known-broken patterns, to see the audit catch them")
		seed       = fs.Uint64("seed", def.Seed, "seed of the workers' request sequences")
		plot       = fs.String("plot", defaultPlot, `chart file, .svg or .png ("" for none)`)
		rate       = fs.String("rate", "", "open-loop: comma-separated total requests/s per run (20000) or percentages of the\n"+
			"strategy's closed-loop peak at the same workers (80%: a closed-loop run comes first); latency from each\n"+
			"request's intended start; the chart then plots p99 and the rate sent against the rate offered (default: closed-loop)")
		slo   = fs.Duration("slo", 0, "with -rate: report each strategy's highest rate whose p99 stayed within this bound (e.g. 10ms)")
		procs = fs.String("procs", "1", "comma-separated numbers of OS processes to spread each run's workers and -instances over\n"+
			"(one instance per process at least), each with its own pools (this command re-executed); one run per count.\n"+
			"1: the workers run in this process. Strategies whose store lives in one process, and checkout, run only at 1.\n"+
			"Tiered strategies run their stream's consumers in as many consumer processes of their own")
		rtt = fs.Duration("rtt", 0, "network round trip between the clients and every server, e.g. 1ms: connections go through\n"+
			"a forwarder on loopback that delays each direction by half of it, as a database one network hop away would (default: loopback)")
		claimIdle = fs.Duration("claim-idle", 0, "tiered strategies under -procs: how long a consumer process's unacknowledged entries\n"+
			"wait before another consumer process claims them (default tiered.DefaultClaimIdle, 30s)")
	)
	faultList := fs.String("faults", "", "comma-separated faults to inject, or all: "+strings.Join(faultNames(), ", ")+";\n"+
		"runs each strategy through each fault on private servers instead of the benchmark (see docs/faults.md)")
	c := config{openers: map[string]bench.Opener{}}
	for _, b := range e.backends {
		c.openers[b.Name] = b.Flags(fs)
	}
	fs.StringVar(&c.format, "format", "table", "output: table, json or csv")
	listed := fs.Bool("list", false, "list the backends, strategies and counterexamples, what each is, and exit")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			help()
			return c, err
		}
		return c, usageError{err.Error() + unitHint(fs, err)}
	}
	if fs.NArg() > 0 {
		return c, usagef("unexpected argument %q (flags only)", fs.Arg(0))
	}
	if *listed {
		list()
		return c, flag.ErrHelp
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })

	var err error
	c.listed = set["strategies"]
	if c.targets, err = selectTargets(*strategies, c.listed, *counter, e); err != nil {
		return c, err
	}
	if c.workers, err = parseWorkers(*workers); err != nil {
		return c, err
	}
	if c.procs, err = parseProcs(*procs, c.workers[0]); err != nil {
		return c, err
	}
	if *claimIdle < 0 || (*claimIdle > 0 && *claimIdle < time.Millisecond) {
		return c, usagef("-claim-idle %v: want 1ms or more", *claimIdle)
	}
	c.claimIdle = *claimIdle
	if *rtt < 0 {
		return c, usagef("-rtt %v: want 0 or more", *rtt)
	}
	c.rtt = *rtt
	w := def
	w.SKUs, w.Stock, w.Warmup, w.Instances, w.Seed, w.Ops = *skus, *stock, *warmup, *instances, *seed, *ops
	w.Duration, w.Drain = *duration, *drain
	w.Orders = bench.OrderMix{
		Lines: *lines, HoldShare: *holdShare, HoldTTL: *holdTTL,
		ReturnShare: *retShare, RestockShare: *restShare, ShortShare: *shortShare,
	}
	if *ops > 0 && !set["duration"] {
		w.Duration = 0
	}
	if w.Skew, err = bench.ParseSkew(*skew); err != nil {
		return c, benchUsage(err)
	}
	if w.QtyMin, w.QtyMax, err = bench.ParseQty(*qty); err != nil {
		return c, benchUsage(err)
	}
	if w.Shape, err = bench.ParseShape(*shape); err != nil {
		return c, benchUsage(err)
	}
	if w.Shape == bench.Checkout && slices.Max(c.procs) > 1 {
		return c, usagef("-procs %s: a checkout runs in one process (its audit follows each order from the worker that placed it)", *procs)
	}
	for _, n := range c.workers {
		w.Workers = n
		if err := w.Validate(); err != nil {
			return c, benchUsage(err)
		}
	}
	c.workload = w
	if w.Shape == bench.Checkout {
		// Known before any server starts: a checkout runs only the targets
		// marked Orders, so the estimate and the servers count only those.
		var run []bench.Target
		for _, t := range c.targets {
			if t.Orders {
				run = append(run, t)
			} else {
				c.skipped = append(c.skipped, t.Name+" does not implement stockguard.Orders")
			}
		}
		if len(run) == 0 {
			return c, usagef("-workload checkout: none of the chosen strategies implements stockguard.Orders")
		}
		c.targets = run
	}
	if c.rates, err = parseRates(*rate); err != nil {
		return c, err
	}
	if *slo < 0 || (*slo > 0 && !set["rate"]) {
		return c, usagef("-slo %v: want a positive bound, with -rate giving the rates to hold to it", *slo)
	}
	c.slo = *slo

	switch c.format {
	case "table", "json", "csv":
	default:
		return c, usagef("-format %q: want table, json or csv", c.format)
	}
	c.plot = *plot
	if *faultList != "" {
		if c.rtt != 0 {
			return c, usagef("-rtt: a fault run sets up its own network (see docs/faults.md)")
		}
		if c.faults, err = parseFaults(*faultList, set, c.workers, *duration, c.format); err != nil {
			return c, err
		}
		c.plot = ""
		if !set["strategies"] {
			c.targets = withReplicaTargets(c.targets, c.faults.list, e.strategies)
		}
	}
	if c.plot != "" {
		if _, err := chartFormat(c.plot); err != nil {
			return c, err
		}
	}
	for _, b := range e.backends {
		if check := c.openers[b.Name].Check; check != nil {
			if err := check(); err != nil {
				return c, usageError{err.Error()}
			}
		}
	}
	return c, nil
}

// selectTargets resolves -strategies and -counterexamples.
func selectTargets(list string, listed, counter bool, e env) ([]bench.Target, error) {
	if !listed {
		out := slices.DeleteFunc(slices.Clone(e.strategies), func(t bench.Target) bool { return t.OnRequest })
		if counter {
			out = append(out, e.counterexamples...)
		}
		if len(out) == 0 {
			return nil, usagef("no strategies are registered")
		}
		return out, nil
	}
	var out []bench.Target
	for _, name := range strings.Split(list, ",") {
		name = strings.TrimSpace(name)
		if name == "" {
			continue
		}
		if slices.ContainsFunc(out, func(t bench.Target) bool { return t.Name == name }) {
			continue
		}
		if strings.Contains(name, "*") {
			matched := false
			for _, t := range e.strategies {
				ok, err := path.Match(name, t.Name)
				if err != nil {
					return nil, usagef("-strategies %q: %v", name, err)
				}
				if ok {
					matched = true
					if !slices.ContainsFunc(out, func(o bench.Target) bool { return o.Name == t.Name }) {
						out = append(out, t)
					}
				}
			}
			if !matched {
				return nil, usagef("-strategies %q matches no strategy; known: %s", name, strings.Join(names(e.strategies), ", "))
			}
			continue
		}
		if i := slices.IndexFunc(e.strategies, func(t bench.Target) bool { return t.Name == name }); i >= 0 {
			out = append(out, e.strategies[i])
			continue
		}
		if i := slices.IndexFunc(e.counterexamples, func(t bench.Target) bool { return t.Name == name }); i >= 0 {
			if !counter {
				return nil, usagef("%s is a counterexample (a known-broken pattern); add -counterexamples to run it", name)
			}
			out = append(out, e.counterexamples[i])
			continue
		}
		return nil, usagef("unknown strategy %q; known: %s", name, strings.Join(names(e.strategies), ", "))
	}
	if len(out) == 0 {
		return nil, usagef("-strategies names no strategy")
	}
	return out, nil
}

func names(ts []bench.Target) []string {
	out := make([]string, len(ts))
	for i, t := range ts {
		out[i] = t.Name
	}
	return out
}

// parseWorkers parses a comma-separated list of worker counts, sorted and
// deduplicated.
func parseWorkers(s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 || n > bench.MaxWorkers {
			return nil, usagef("-workers %q: want a comma-separated list of counts in 1…%d", s, bench.MaxWorkers)
		}
		out = append(out, n)
	}
	slices.Sort(out)
	return slices.Compact(out), nil
}

// parseProcs parses -procs: a comma-separated list of process counts, each
// at most the fewest workers (every process runs one at least), sorted and
// deduplicated.
func parseProcs(s string, fewestWorkers int) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 || n > maxProcs {
			return nil, usagef("-procs %q: want a comma-separated list of process counts in 1…%d", s, maxProcs)
		}
		if n > fewestWorkers {
			return nil, usagef("-procs %q: %d processes for %d workers (each process runs one worker at least)", s, n, fewestWorkers)
		}
		out = append(out, n)
	}
	slices.Sort(out)
	return slices.Compact(out), nil
}

// checkWritable fails when path cannot be written, so that a run does not
// end, minutes later, without its chart. It leaves an existing file as it
// was and no new one behind.
func checkWritable(path string) error {
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if errors.Is(err, os.ErrNotExist) {
		if f, err = os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644); err == nil {
			f.Close()
			return os.Remove(path)
		}
	}
	if err != nil {
		return usagef("-plot %q: cannot write the chart there: %v", path, err)
	}
	return f.Close()
}

func chartFormat(path string) (bench.ChartFormat, error) {
	switch strings.ToLower(filepath.Ext(path)) {
	case ".svg":
		return bench.SVG, nil
	case ".png":
		return bench.PNG, nil
	}
	return "", usagef("-plot %q: the file name must end in .svg or .png", path)
}

// planned estimates the run time of c, for the progress report.
func (c config) planned() time.Duration {
	return time.Duration(c.runs()) * (c.workload.Warmup + c.workload.Duration)
}

// runs is the number of runs c plans.
func (c config) runs() int {
	return len(c.targets) * len(c.workers) * len(c.procs) * len(c.rates)
}

// benchUsage is a usage error from one of bench's parsers or validators,
// worded for the command line: without the package's "bench: ".
func benchUsage(err error) usageError {
	return usageError{strings.TrimPrefix(err.Error(), "bench: ")}
}

// unitHint adds to a flag's parse error, when the flag takes a duration,
// what the flag package does not say: a duration needs its unit.
func unitHint(fs *flag.FlagSet, err error) string {
	_, rest, ok := strings.Cut(err.Error(), " for flag -")
	if !ok {
		return ""
	}
	name, _, _ := strings.Cut(rest, ":")
	f := fs.Lookup(name)
	if f == nil {
		return ""
	}
	if g, ok := f.Value.(flag.Getter); ok {
		if _, ok := g.Get().(time.Duration); ok {
			return " (a duration needs its unit: 3s, 500ms, 2m)"
		}
	}
	return ""
}

// helpWidth is the width help wraps its text to.
const helpWidth = 100

// printFlags writes fs's flags, each name and its usage (newlines folded)
// on one line when they fit, wrapped under the name's column otherwise.
func printFlags(w io.Writer, fs *flag.FlagSet) {
	fs.VisitAll(func(f *flag.Flag) {
		kind, usage := flag.UnquoteUsage(f)
		head := "  -" + f.Name
		if kind != "" {
			head += " " + kind
		}
		if def := f.DefValue; def != "" && def != "0" && def != "false" && def != "0s" && !strings.Contains(usage, "(default") {
			if kind == "string" {
				def = strconv.Quote(def)
			}
			usage += " (default " + def + ")"
		}
		wrap(w, head, usage)
	})
}

// wrap writes head, padded to a column, and text (whitespace folded)
// wrapped to helpWidth under that column; an empty head indents the text
// by two.
func wrap(w io.Writer, head, text string) {
	const col = 26
	indent := strings.Repeat(" ", col)
	line := head
	switch {
	case head == "":
		indent, line = "  ", "  "
	case len(head) < col-1:
		line = head + strings.Repeat(" ", col-len(head))
	default:
		fmt.Fprintln(w, head)
		line = indent
	}
	start := len(line)
	for _, word := range strings.Fields(text) {
		if len(line) > start && len(line)+1+len(word) > helpWidth {
			fmt.Fprintln(w, line)
			line, start = indent, len(indent)
		}
		if len(line) > start {
			line += " "
		}
		line += word
	}
	fmt.Fprintln(w, line)
}
