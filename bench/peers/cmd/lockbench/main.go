// Command lockbench measures redislock's locks against bsm/redislock,
// redsync and rueidislock in one run, on private redis-server processes it
// starts from PATH (package peers), in alternating rounds, and prints a
// Markdown table per scenario:
//
//	go run ./cmd/lockbench -rounds 3 -duration 3s
//
// (from bench/peers; it is a module of its own).
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"regexp"
	"runtime"
	"runtime/pprof"
	"slices"
	"time"

	"github.com/stockguard/stockguard/bench/peers"
)

func main() {
	rounds := flag.Int("rounds", 3, "rounds; each measures every peer of every scenario once")
	d := flag.Duration("duration", 3*time.Second, "measured time per peer, scenario and round")
	only := flag.String("only", "", "run only the scenarios whose name matches this regular expression")
	cpuprofile := flag.String("cpuprofile", "", "write a CPU profile of the whole run (this process only, not Redis) to this file")
	flag.Parse()
	match, err := regexp.Compile(*only)
	if *rounds < 1 || *d <= 0 || err != nil {
		fmt.Fprintln(os.Stderr, "lockbench: want -rounds ≥ 1, a positive -duration and a valid -only")
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	err = run(ctx, *rounds, *d, match, *cpuprofile)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "lockbench:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, rounds int, d time.Duration, match *regexp.Regexp, cpuprofile string) error {
	if cpuprofile != "" {
		f, err := os.Create(cpuprofile)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
		defer pprof.StopCPUProfile()
	}
	srv, err := peers.OpenServers(ctx, peers.Masters)
	if err != nil {
		return err
	}
	defer srv.Close()
	run := peers.NewRun()
	cases, closePeers, err := peers.Standard(srv, run)
	if err != nil {
		return err
	}
	defer closePeers()
	cases = slices.DeleteFunc(cases, func(c peers.Case) bool { return !match.MatchString(c.Scenario.Name) })
	fmt.Printf("lockbench -rounds %d -duration %v: %s, %d CPUs; Redis %s, %d private servers\n",
		rounds, d, runtime.Version(), runtime.NumCPU(), srv.Version, len(srv.Addrs))
	results, err := peers.Rounds(ctx, cases, run, rounds, d, os.Stderr)
	if err != nil {
		return err
	}
	peers.WriteMarkdown(os.Stdout, cases, results)
	return nil
}
