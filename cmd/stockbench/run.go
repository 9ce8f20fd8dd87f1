package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/schollz/progressbar/v3"
	"golang.org/x/term"

	"github.com/stockguard/stockguard/bench"
)

// env is what the command runs with: its output streams and the backends
// and targets it knows (tests swap in their own targets).
type env struct {
	stdout, stderr  io.Writer
	backends        []bench.Backend
	strategies      []bench.Target
	counterexamples []bench.Target
	// consumerStarted, when set (by tests), is told each consumer process
	// of a -procs run, and the copy of the work it was given, once it is
	// ready.
	consumerStarted func(name string, p *os.Process, c bench.Consumer)
}

// run is the whole command; it returns the exit status.
func run(ctx context.Context, args []string, e env) int {
	c, err := parse(args, e, e.stdout)
	var ue usageError
	switch {
	case errors.Is(err, flag.ErrHelp):
		return exitOK
	case errors.As(err, &ue):
		fmt.Fprintf(e.stderr, "stockbench: %s\nRun stockbench -h for the flags.\n", ue.msg)
		return exitUsage
	case err != nil:
		fmt.Fprintf(e.stderr, "stockbench: %v\n", err)
		return exitError
	}

	if c.faults.list != nil {
		return runFaults(ctx, c, e)
	}
	if c.plot != "" {
		if err := checkWritable(c.plot); err != nil {
			fmt.Fprintf(e.stderr, "stockbench: %v\nRun stockbench -h for the flags.\n", err)
			return exitUsage
		}
	}
	began := time.Now()
	for _, s := range c.skipped {
		fmt.Fprintf(e.stderr, "stockbench: skipped: %s\n", s)
	}
	fmt.Fprintf(e.stderr, "stockbench: %d strategies × %d worker counts × %d process counts × %d loads, about %v plus set-up\n",
		len(c.targets), len(c.workers), len(c.procs), len(c.rates), c.planned().Round(time.Second))
	srv, dropped, err := openServers(ctx, c, slices.Max(c.workers))
	if err != nil {
		fmt.Fprintf(e.stderr, "stockbench: %v\n", err)
		return exitError
	}
	defer srv.Close()
	if len(dropped) > 0 {
		c.targets = slices.DeleteFunc(c.targets, func(t bench.Target) bool {
			if err, ok := dropped[t.Name]; ok {
				fmt.Fprintf(e.stderr, "stockbench: %s left out, its server is not reachable (name it with -strategies to require it): %v\n", t.Name, firstLine(err))
				return true
			}
			return false
		})
	}
	for _, s := range srv.info {
		fmt.Fprintf(e.stderr, "stockbench: %s\n", s)
	}

	results, skipped, failed := runAll(ctx, c, srv, e)
	skipped = append(slices.Clone(c.skipped), skipped...)

	if err := report(e.stdout, c, bench.NewMeta(began, c.workload, c.workers, srv.info), results, skipped); err != nil {
		fmt.Fprintf(e.stderr, "stockbench: writing the report: %v\n", err)
		failed = true
	}
	if c.plot != "" && len(results) > 0 {
		if err := writeChart(c.plot, results, c.slo); err != nil {
			fmt.Fprintf(e.stderr, "stockbench: chart: %v\n", err)
			failed = true
		} else {
			fmt.Fprintf(e.stderr, "stockbench: chart written to %s\n", c.plot)
		}
	}
	for _, r := range results {
		if !r.Counterexample && !r.Sound() {
			fmt.Fprintf(e.stderr, "stockbench: UNSOUND: %s — see the audit above\n", r.Target)
			return exitUnsound
		}
	}
	if failed {
		return exitError
	}
	return exitOK
}

// runAll runs every target at every worker count, process count and load.
// It stops at an interrupt; a target that fails to run is reported and
// skipped. skipped says why each target that cannot run the workload
// (bench.ErrSkipped) was left out, which is not a failure.
func runAll(ctx context.Context, c config, srv *servers, e env) (results []*bench.Result, skipped []string, failed bool) {
	p := newProgress(e.stderr, c.runs())
	defer p.finish()
	for _, t := range c.targets {
	counts:
		for _, n := range c.workers {
			for _, procs := range c.procs {
				peak := 0.0 // the closed-loop rate, for rates relative to it
				for _, spec := range c.rates {
					w := c.workload
					w.Workers = n
					rate, ok := spec.at(peak)
					if !ok {
						p.printf("stockbench: %s at %d workers: no closed-loop peak for %v\n", t.Name, n, spec)
						p.done()
						continue
					}
					w.Rate = rate
					label := fmt.Sprintf("%s ×%d", t.Name, n)
					if procs > 1 {
						label += fmt.Sprintf(" in %d procs", procs)
					}
					if !spec.closed() {
						label += fmt.Sprintf(" @%s/s", commas(rate))
					}
					p.start(label)
					var r *bench.Result
					var err error
					if procs > 1 {
						plan := splitPlan{claimIdle: c.claimIdle, rtt: c.rtt, logf: p.printf, started: e.consumerStarted}
						r, err = runProcs(ctx, procs, t, srv, w, plan, p.within)
					} else {
						r, err = bench.Run(ctx, t, srv.conns, w, bench.WithProgress(p.within), bench.WithServerCPU(srv.info))
					}
					p.done()
					if r != nil {
						results = append(results, r)
						if spec.closed() {
							peak = r.AttemptRate
						}
					}
					if ctx.Err() != nil {
						p.printf("stockbench: interrupted; reporting the runs so far\n")
						return results, skipped, true
					}
					if errors.Is(err, bench.ErrSkipped) {
						msg := strings.TrimPrefix(err.Error(), "bench: skipped: ")
						if !slices.Contains(skipped, msg) {
							skipped = append(skipped, msg)
							p.printf("stockbench: skipped: %s\n", msg)
						}
						if procs > 1 {
							break // at other process counts it may run
						}
						break counts
					}
					if err != nil {
						p.printf("stockbench: %s at %d workers: %v\n", t.Name, n, err)
						failed = true
						if r == nil {
							break counts // the next worker count would fail the same way
						}
					}
				}
			}
		}
	}
	return results, skipped, failed
}

func report(w io.Writer, c config, m bench.Meta, results []*bench.Result, skipped []string) error {
	m.Skipped = skipped
	m.RTTMs = float64(c.rtt) / float64(time.Millisecond)
	switch c.format {
	case "json":
		return bench.WriteJSON(w, m, results)
	case "csv":
		return bench.WriteCSV(w, results)
	}
	wl := c.workload
	stock := fmt.Sprint(wl.InitialStock())
	if wl.Stock == 0 && wl.Shape == bench.Steady {
		stock = "10^12 (never runs out)"
	}
	end := fmt.Sprintf("%v measured", wl.Duration)
	if wl.Ops > 0 {
		end = fmt.Sprintf("%d requests", wl.Ops)
		if wl.Duration > 0 {
			end += fmt.Sprintf(" (at most %v)", wl.Duration)
		}
	}
	skus := "1 hot SKU"
	if wl.SKUs > 1 {
		skus = fmt.Sprintf("%d SKUs (%s)", wl.SKUs, wl.Skew)
	}
	spread := fmt.Sprintf("workers over %d app instances", wl.Instances)
	if slices.Max(c.procs) > 1 {
		spread = fmt.Sprintf("workers over %d app instances in all (one per process at least) in %s OS processes", wl.Instances, joinInts(c.procs))
	}
	if wl.Shape == bench.Steady && wl.Drain > 0 {
		skus += fmt.Sprintf(" (each worker's first %d requests on a SKU that sells out, 1–3 units each)", wl.Drain)
	}
	fmt.Fprintf(w, "workload: %s, %s, qty %s, stock %s per SKU, %s after %v warm-up, %s, seed %d\n",
		wl.Shape, skus, wl.Qty(), stock, end, wl.Warmup, spread, wl.Seed)
	fmt.Fprintf(w, "load: %s\n", loadText(c))
	if c.rtt != 0 {
		fmt.Fprintf(w, "network: %v round trip between the clients and every server (each direction delayed by %v through a forwarder)\n", c.rtt, c.rtt/2)
	}
	if len(m.Servers) > 0 {
		var lines []string
		for _, s := range m.Servers {
			lines = append(lines, s.String())
		}
		fmt.Fprintf(w, "servers: %s\n", strings.Join(lines, "; "))
	}
	if wl.Shape == bench.Checkout {
		o := wl.Orders
		fmt.Fprintf(w, "orders: %s, %.0f%% held for %v, %.0f%% of takes returned, %.0f%% of operations restocks, %.0f%% of carts short\n",
			wl.LinesText(), 100*o.HoldShare, o.HoldTTL, 100*o.ReturnShare, 100*o.RestockShare, 100*o.ShortShare)
	}
	for _, s := range skipped {
		fmt.Fprintf(w, "skipped: %s\n", s)
	}
	fmt.Fprintln(w)
	if err := bench.WriteTable(w, results); err != nil {
		return err
	}
	if err := writeProcs(w, results); err != nil || c.slo == 0 {
		return err
	}
	return writeSLO(w, results, c.slo)
}

// writeChart draws the results against the worker count or, for a -rate
// sweep, against the offered rate, with the -slo bound.
func writeChart(path string, results []*bench.Result, slo time.Duration) error {
	f, err := chartFormat(path)
	if err != nil {
		return err
	}
	var b bytes.Buffer
	if slices.ContainsFunc(results, func(r *bench.Result) bool { return r.Workload.Rate > 0 }) {
		err = bench.WriteSweepChart(&b, results, slo, f)
	} else {
		err = bench.WriteChart(&b, results, f)
	}
	if err != nil {
		return err
	}
	return os.WriteFile(path, b.Bytes(), 0o644)
}

// progress shows a bar on a terminal, or one line per run elsewhere.
type progress struct {
	out   io.Writer
	bar   *progressbar.ProgressBar
	total int
	index int
}

func newProgress(stderr io.Writer, total int) *progress {
	p := &progress{out: stderr, total: total}
	if f, ok := stderr.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
		p.bar = progressbar.NewOptions(total*1000,
			progressbar.OptionSetWriter(stderr),
			progressbar.OptionSetWidth(30),
			progressbar.OptionSetPredictTime(true),
			progressbar.OptionThrottle(100*time.Millisecond),
			progressbar.OptionClearOnFinish(),
		)
	}
	return p
}

func (p *progress) start(what string) {
	if p.bar == nil {
		fmt.Fprintf(p.out, "stockbench: [%d/%d] %s\n", p.index+1, p.total, what)
		return
	}
	p.bar.Describe(fmt.Sprintf("[%d/%d] %-32s", p.index+1, p.total, what))
}

// within reports the fraction done of the current run.
func (p *progress) within(f float64) {
	if p.bar != nil {
		p.bar.Set(p.index*1000 + int(f*1000))
	}
}

func (p *progress) done() {
	p.index++
	if p.bar != nil {
		p.bar.Set(p.index * 1000)
	}
}

// printf writes a message without tearing the bar.
func (p *progress) printf(format string, args ...any) {
	if p.bar != nil {
		p.bar.Clear()
	}
	fmt.Fprintf(p.out, format, args...)
}

func (p *progress) finish() {
	if p.bar != nil {
		p.bar.Finish()
	}
}

// joinInts lists ns as "1, 4".
func joinInts(ns []int) string {
	s := make([]string, len(ns))
	for i, n := range ns {
		s[i] = strconv.Itoa(n)
	}
	return strings.Join(s, ", ")
}

// firstLine is the first line of err's text: a backend's "unavailable"
// error goes on with how to provide one, which a note need not repeat.
func firstLine(err error) string {
	line, _, _ := strings.Cut(err.Error(), "\n")
	return line
}
