// Command stockbench runs stockguard's strategies side by side under contention, audits every run for oversold and lost stock, and prints a table and draws a chart.
//
// With no flags it finds or starts MySQL/MariaDB, PostgreSQL and Redis,
// runs every strategy at 1, 8 and 64 workers on one hot SKU, prints the
// table and writes stockbench.svg. Run it with -h for the flags, -list for
// what each strategy does.
//
// Exit status: 0 when every strategy was sound, 1 on an error (or an
// interrupt), 2 on bad usage, 3 when a strategy (not a counterexample) was
// unsound or its audit could not complete. Under go run, go prints the
// status ("exit status 3") and exits 1 itself.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/redis/go-redis/v9"

	"github.com/stockguard/stockguard/bench"
	_ "github.com/stockguard/stockguard/bench/all" // registers the backends and targets
)

// quiet drops go-redis's log lines ("redis: connection pool: ..."): they
// would tear the table and the progress bar, and every failure that matters
// reaches the command as an error, which it reports.
type quiet struct{}

func (quiet) Printf(context.Context, string, ...any) {}

func main() {
	redis.SetLogger(quiet{})
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	// After the first signal, a second one kills at once.
	context.AfterFunc(ctx, stop)
	if isWorker() {
		code := workerMain(ctx, os.Stdin, os.Stdout, bench.Backends())
		stop()
		os.Exit(code)
	}
	code := run(ctx, os.Args[1:], env{
		stdout: os.Stdout, stderr: os.Stderr, backends: bench.Backends(),
		strategies: bench.Targets(), counterexamples: bench.Counterexamples(),
	})
	stop()
	os.Exit(code)
}
