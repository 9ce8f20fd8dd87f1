package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/go-sql-driver/mysql"

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

Runs stock-decrement strategies side by side against MySQL and Redis, audits
every run (units acknowledged must equal the stock gone; nothing oversold,
nothing lost) and prints a table. With no flags: every strategy at 1, 8 and
64 workers on one hot SKU, a table on stdout and a chart in stockbench.svg.

Servers: -mysql-dsn / -redis-addr, else STOCKGUARD_MYSQL_DSN /
STOCKGUARD_REDIS_ADDR, else private servers started from mariadbd/mysqld and
redis-server on PATH (stopped at exit), else Docker. redis-redlock also locks
on the two -redlock-addrs servers, else on two private redis-servers.

Exit status: 0 all sound, 1 error, 2 bad usage, 3 a strategy was unsound.

Flags:
`
)

// config is the parsed command line.
type config struct {
	targets   []bench.Target
	workers   []int
	workload  bench.Workload
	mysqlDSN  string
	redisAddr string
	// redlockAddrs are the Redlock voters besides redisAddr; empty means
	// private servers are started for them.
	redlockAddrs []string
	format       string
	plot         string
}

// usageError is a command line that cannot run; it exits with status 2.
type usageError struct{ msg string }

func (e usageError) Error() string { return e.msg }

func usagef(format string, args ...any) error { return usageError{fmt.Sprintf(format, args...)} }

// parse reads the command line. It returns flag.ErrHelp for -h, a
// usageError for anything it cannot run.
func parse(args []string, e env, stderr io.Writer) (config, error) {
	fs := flag.NewFlagSet("stockbench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), usageSummary)
		fs.PrintDefaults()
		fmt.Fprintf(fs.Output(), "\nStrategies:\n")
		for _, t := range e.strategies {
			fmt.Fprintf(fs.Output(), "  %-30s %s (%s)\n", t.Name, t.About, t.Needs)
		}
		fmt.Fprintf(fs.Output(), "\nCounterexamples (known broken, only with -counterexamples):\n")
		for _, t := range e.counterexamples {
			fmt.Fprintf(fs.Output(), "  %-30s %s (%s)\n", t.Name, t.About, t.Needs)
		}
	}
	def := bench.DefaultWorkload()
	var (
		strategies = fs.String("strategies", "", "comma-separated strategy names (default: all strategies)")
		workers    = fs.String("workers", "1,8,64", "comma-separated worker counts; one run per strategy and count")
		skus       = fs.Int("skus", def.SKUs, "number of SKUs")
		skew       = fs.String("skew", def.Skew.String(), "how requests spread over SKUs: uniform, zipf or zipf:S (S > 1)")
		stock      = fs.Int64("stock", 0, "initial stock per SKU (default: 10^12 for steady, 5000 for flash)")
		qty        = fs.String("qty", def.Qty(), "units per request: N or MIN-MAX")
		duration   = fs.Duration("duration", def.Duration, "measured time per run")
		ops        = fs.Int64("ops", 0, "end each run after this many measured requests instead (-duration still caps it when set explicitly)")
		warmup     = fs.Duration("warmup", def.Warmup, "unmeasured warm-up per run")
		instances  = fs.Int("instances", def.Instances, "app instances the workers are spread over (each builds its own strategy value)")
		shape      = fs.String("workload", def.Shape.String(), "steady (stock never runs out) or flash (stock ≪ demand: time to sell out)")
		counter    = fs.Bool("counterexamples", false, "also run the known-broken patterns, to see the audit catch them")
		seed       = fs.Uint64("seed", def.Seed, "seed of the workers' request sequences")
		plot       = fs.String("plot", defaultPlot, `chart file, .svg or .png ("" for none)`)
	)
	var c config
	fs.StringVar(&c.mysqlDSN, "mysql-dsn", "", "MySQL DSN, e.g. root@tcp(127.0.0.1:3306)/test (default: resolved, see above)")
	fs.StringVar(&c.redisAddr, "redis-addr", "", "Redis address host:port (default: resolved, see above)")
	redlock := fs.String("redlock-addrs", "", fmt.Sprintf("the %d Redis servers, host:port comma-separated, that redis-redlock locks on besides -redis-addr; each must be a server of its own (default: private redis-servers)", bench.RedlockVoters-1))
	fs.StringVar(&c.format, "format", "table", "output: table, json or csv")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return c, err
		}
		return c, usageError{err.Error()}
	}
	if fs.NArg() > 0 {
		return c, usagef("unexpected argument %q (flags only)", fs.Arg(0))
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })

	var err error
	if c.targets, err = selectTargets(*strategies, set["strategies"], *counter, e); err != nil {
		return c, err
	}
	if c.workers, err = parseWorkers(*workers); err != nil {
		return c, err
	}
	w := def
	w.SKUs, w.Stock, w.Warmup, w.Instances, w.Seed, w.Ops = *skus, *stock, *warmup, *instances, *seed, *ops
	w.Duration = *duration
	if *ops > 0 && !set["duration"] {
		w.Duration = 0
	}
	if w.Skew, err = bench.ParseSkew(*skew); err != nil {
		return c, usageError{err.Error()}
	}
	if w.QtyMin, w.QtyMax, err = bench.ParseQty(*qty); err != nil {
		return c, usageError{err.Error()}
	}
	if w.Shape, err = bench.ParseShape(*shape); err != nil {
		return c, usageError{err.Error()}
	}
	for _, n := range c.workers {
		w.Workers = n
		if err := w.Validate(); err != nil {
			return c, usageError{err.Error()}
		}
	}
	c.workload = w

	switch c.format {
	case "table", "json", "csv":
	default:
		return c, usagef("-format %q: want table, json or csv", c.format)
	}
	c.plot = *plot
	if c.plot != "" {
		if _, err := chartFormat(c.plot); err != nil {
			return c, err
		}
	}
	if c.mysqlDSN != "" {
		if _, err := mysql.ParseDSN(c.mysqlDSN); err != nil {
			return c, usagef("-mysql-dsn: %v", err)
		}
	}
	if c.redisAddr != "" && !strings.Contains(c.redisAddr, ":") {
		return c, usagef("-redis-addr %q: want host:port", c.redisAddr)
	}
	if *redlock != "" {
		c.redlockAddrs = strings.Split(*redlock, ",")
		if len(c.redlockAddrs) != bench.RedlockVoters-1 {
			return c, usagef("-redlock-addrs %q: want %d addresses", *redlock, bench.RedlockVoters-1)
		}
		for _, a := range c.redlockAddrs {
			if !strings.Contains(a, ":") || a == c.redisAddr {
				return c, usagef("-redlock-addrs %q: want host:port of servers other than -redis-addr", *redlock)
			}
		}
	}
	return c, nil
}

// selectTargets resolves -strategies and -counterexamples.
func selectTargets(list string, listed, counter bool, e env) ([]bench.Target, error) {
	if !listed {
		out := slices.Clone(e.strategies)
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
	return time.Duration(len(c.targets)*len(c.workers)) * (c.workload.Warmup + c.workload.Duration)
}
