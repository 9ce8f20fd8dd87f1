package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/stockguard/stockguard/bench"
)

// With -procs N, a run's workers run in N worker processes, as a service
// runs on N machines: each is this command re-executed with workerEnv set,
// with pools and strategy values of its own. The parent opens (or starts)
// the servers and stocks the store; each worker attaches to it, runs its
// share of the workers and sends back its bench.Part; the parent merges
// them and audits the store once, over all of them (see bench.Stock).
//
// The protocol is JSON lines: the parent writes the job on the worker's
// stdin, the worker answers {"ready":true} once attached, the parent writes
// "go" to all of them at once, and each worker answers with its part, or
// with {"error":…} at any point. Closing the worker's stdin stops it early
// (an interrupt); it then still reports what it measured.

// workerEnv, set in the environment, makes the command a worker process.
const workerEnv = "STOCKBENCH_PROCS_WORKER"

// maxProcs bounds -procs.
const maxProcs = 64

// readyTimeout bounds a worker's start-up: exec, connecting, attaching.
const readyTimeout = time.Minute

// job is what a worker process runs.
type job struct {
	Target    string         `json:"target"`
	Namespace string         `json:"namespace"`
	Workload  bench.Workload `json:"workload"`
	First     int            `json:"first"`
	Count     int            `json:"count"`
	// Args are the backends' flags naming the parent's servers
	// (bench.Opened.Args), so that the worker opens those, never its own.
	Args []string `json:"args"`
	// RTT is the round trip the process puts between itself and the
	// servers (-rtt), through forwarders of its own.
	RTT time.Duration `json:"rtt_ns,omitempty"`
	// Consumer, when set, makes the process a consumer process: it runs
	// that copy of the store's own work (bench.AttachConsumer) instead of
	// workers, until its stdin says stop, then reports its figures.
	Consumer *bench.Consumer `json:"consumer,omitempty"`
}

// message is a line a worker writes on its stdout.
type message struct {
	Ready bool               `json:"ready,omitempty"`
	Part  *bench.Part        `json:"part,omitempty"`
	Stats map[string]float64 `json:"stats,omitempty"`
	Err   string             `json:"error,omitempty"`
}

// isWorker reports whether the command runs as a worker process.
func isWorker() bool { return os.Getenv(workerEnv) != "" }

// workerMain is a worker process: it runs the job read from stdin and
// reports on stdout. It returns the exit status.
func workerMain(ctx context.Context, stdin io.Reader, stdout io.Writer, backends []bench.Backend) int {
	out := json.NewEncoder(stdout)
	fail := func(format string, args ...any) int {
		out.Encode(message{Err: fmt.Sprintf(format, args...)})
		return exitError
	}
	in := bufio.NewReader(stdin)
	line, err := in.ReadBytes('\n')
	if err != nil {
		return fail("reading the job: %v", err)
	}
	var j job
	if err := json.Unmarshal(line, &j); err != nil {
		return fail("decoding the job: %v", err)
	}
	t, ok := bench.Lookup(j.Target)
	if !ok {
		return fail("unknown target %q", j.Target)
	}
	fs := flag.NewFlagSet("stockbench worker", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	openers := map[string]bench.Opener{}
	for _, b := range backends {
		openers[b.Name] = b.Flags(fs)
	}
	if err := fs.Parse(j.Args); err != nil {
		return fail("backend flags %q: %v", j.Args, err)
	}
	conns := bench.Servers{}
	for _, name := range t.Needs {
		o, ok := openers[name]
		if !ok {
			return fail("%s needs backend %q, which is not registered", t.Name, name)
		}
		if o.Check != nil {
			if err := o.Check(); err != nil {
				return fail("%v", err)
			}
		}
		opened, err := o.Open(ctx, bench.OpenConfig{Pool: poolSize(j.Count), RTT: j.RTT})
		if err != nil {
			return fail("%v", err)
		}
		defer opened.Close()
		conns[name] = opened.Conn
	}
	if j.Consumer != nil {
		return consumerMain(ctx, in, out, t, conns, j)
	}
	sh, err := bench.Attach(ctx, t, conns, j.Workload, j.Namespace, j.First, j.Count)
	if err != nil {
		return fail("%v", err)
	}
	defer sh.Close()
	if err := out.Encode(message{Ready: true}); err != nil {
		return exitError
	}
	if line, err := in.ReadBytes('\n'); err != nil || strings.TrimSpace(string(line)) != "go" {
		return fail("no go from the parent (%q, %v)", line, err)
	}
	// Any further line, or stdin closing, stops the run early.
	rctx, stop := context.WithCancel(ctx)
	defer stop()
	go func() {
		in.ReadBytes('\n')
		stop()
	}()
	p, err := sh.Run(rctx)
	if err != nil {
		return fail("%v", err)
	}
	if err := out.Encode(message{Part: p}); err != nil {
		return exitError
	}
	return exitOK
}

// consumerMain is a consumer process, attached: it runs its copy of the
// store's own work from the moment it is ready until its stdin has a line
// or closes, then reports the copy's figures. It returns the exit status.
func consumerMain(ctx context.Context, in *bufio.Reader, out *json.Encoder, t bench.Target, conns bench.Servers, j job) int {
	consume, err := bench.AttachConsumer(ctx, t, conns, j.Namespace, *j.Consumer)
	if err != nil {
		out.Encode(message{Err: err.Error()})
		return exitError
	}
	rctx, stop := context.WithCancel(ctx)
	defer stop()
	figs := make(chan map[string]float64, 1)
	failed := make(chan error, 1)
	go func() {
		f, err := consume(rctx)
		if err != nil {
			failed <- err
			return
		}
		figs <- f
	}()
	if err := out.Encode(message{Ready: true}); err != nil {
		return exitError
	}
	go func() {
		in.ReadBytes('\n')
		stop()
	}()
	select {
	case f := <-figs:
		if err := out.Encode(message{Stats: f}); err != nil {
			return exitError
		}
		return exitOK
	case err := <-failed:
		out.Encode(message{Err: err.Error()})
		return exitError
	}
}

// serverArgs returns the backend flags that reach, from a worker process,
// the servers t needs.
func serverArgs(t bench.Target, srv *servers) ([]string, error) {
	var args []string
	for _, name := range t.Needs {
		a := srv.args[name]
		if a == nil {
			return nil, fmt.Errorf("%s: backend %s cannot be reached from another process", t.Name, name)
		}
		args = append(args, a...)
	}
	return args, nil
}

// splitPlan is how runProcs runs a store's own work (bench.Store.Consume:
// tiered's consumers).
type splitPlan struct {
	// claimIdle is every consumer process's bench.Consumer.ClaimIdle.
	claimIdle time.Duration
	// rtt is -rtt, which every process puts between itself and the
	// servers.
	rtt time.Duration
	// logf reports what does not fail the run: a consumer process that
	// died, whose share the others took over.
	logf func(format string, args ...any)
	// started, when set (by tests), is told each consumer process, and
	// the copy of the work it was given, once it is ready.
	started func(name string, p *os.Process, c bench.Consumer)
}

// consumer is the work of the i-th consumer process.
func (plan splitPlan) consumer(i int) bench.Consumer {
	return bench.Consumer{Name: fmt.Sprintf("consumer-%d", i+1), ClaimIdle: plan.claimIdle}
}

// runProcs runs workload w of target t with its workers spread over procs
// worker processes, and merges and audits their results. A store with work
// of its own (tiered's consumer) runs it in procs consumer processes beside
// the workers', as a deployment runs its consumers apart from the service
// (docs/tiered.md); they run until the audit is done, and their figures
// are merged into the result's Stats, with consumer_procs and
// consumer_procs_lost (those that died before reporting).
func runProcs(ctx context.Context, procs int, t bench.Target, srv *servers, w bench.Workload, plan splitPlan, progress func(float64)) (*bench.Result, error) {
	args, err := serverArgs(t, srv)
	if err != nil {
		return nil, err
	}
	// -instances counts the app instances in all, spread over the
	// processes, one each at least: -procs 1,4 -instances 4 compares the
	// same deployment in one process and in four.
	w.Instances = max(w.Instances, procs)
	st, err := bench.Stock(ctx, t, srv.conns, w)
	if err != nil {
		return nil, err
	}
	defer st.Close(ctx)
	exe, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("finding the executable to run workers: %w", err)
	}
	workers := make([]*workerProc, procs)
	var consumers []*workerProc
	defer func() {
		for _, wp := range append(workers, consumers...) {
			if wp != nil {
				wp.kill()
			}
		}
	}()
	if st.Consumes() {
		consumers = make([]*workerProc, procs)
		for i := range procs {
			c := plan.consumer(i)
			j := job{Target: t.Name, Namespace: st.Namespace(), Workload: w, Args: args, Consumer: &c, RTT: plan.rtt}
			if consumers[i], err = startProc(exe, fmt.Sprintf("consumer process %d of %d", i+1, procs), j); err != nil {
				return nil, err
			}
		}
	}
	first := 0
	for i := range procs {
		count, insts := share(w.Workers, procs, i), share(w.Instances, procs, i)
		wi := w
		wi.Instances = insts
		j := job{Target: t.Name, Namespace: st.Namespace(), Workload: wi, First: first, Count: count, Args: args, RTT: plan.rtt}
		first += count
		if workers[i], err = startProc(exe, fmt.Sprintf("worker process %d of %d", i+1, procs), j); err != nil {
			return nil, err
		}
	}
	ready := time.NewTimer(readyTimeout)
	defer ready.Stop()
	for _, wp := range append(consumers, workers...) {
		select {
		case m, ok := <-wp.msgs:
			if !ok || !m.Ready {
				return nil, wp.failure(m)
			}
		case <-ready.C:
			return nil, fmt.Errorf("%s: not ready after %v", wp.name, readyTimeout)
		case <-ctx.Done():
			return nil, fmt.Errorf("%s: interrupted while starting: %w", t.Name, ctx.Err())
		}
	}
	if plan.started != nil {
		for i, wp := range consumers {
			plan.started(wp.name, wp.cmd.Process, plan.consumer(i))
		}
	}
	for _, wp := range workers {
		if _, err := io.WriteString(wp.stdin, "go\n"); err != nil {
			return nil, fmt.Errorf("%s: %w", wp.name, err)
		}
	}
	// An interrupt closes the workers' stdin: they stop and report what
	// they measured, which is merged and audited as an interrupted run.
	stopWorkers := context.AfterFunc(ctx, func() {
		for _, wp := range workers {
			wp.stdin.Close()
		}
	})
	defer stopWorkers()
	stopProgress := showProgress(progress, w.Warmup+w.Duration)
	defer stopProgress()

	parts := make([]*bench.Part, procs)
	for i, wp := range workers {
		m, ok := <-wp.msgs
		if !ok || m.Part == nil {
			return nil, wp.failure(m)
		}
		parts[i] = m.Part
		if err := wp.wait(); err != nil {
			return nil, err
		}
	}
	// The consumers run on through the audit, which waits for the stream
	// to drain.
	res, err := st.Finish(ctx, parts)
	figs := stopConsumers(consumers, plan.logf)
	if res != nil && consumers != nil {
		bench.MergeStats(res, figs...)
		res.Stats["consumer_procs"] = float64(len(consumers))
		res.Stats["consumer_procs_lost"] = float64(len(consumers) - len(figs))
	}
	return res, err
}

// stopConsumers tells the consumer processes to stop and returns the
// figures of those that reported; one that died (or failed) is told to
// logf.
func stopConsumers(consumers []*workerProc, logf func(string, ...any)) []map[string]float64 {
	var figs []map[string]float64
	for _, wp := range consumers {
		wp.stdin.Close()
	}
	for _, wp := range consumers {
		m, ok := <-wp.msgs
		if ok && m.Stats != nil {
			figs = append(figs, m.Stats)
		}
		err := wp.wait()
		switch {
		case m.Err != "":
			logf("stockbench: %s: %s\n", wp.name, m.Err)
		case !ok:
			logf("stockbench: %s ended before reporting (%v); the others took over its entries\n", wp.name, err)
		case err != nil:
			logf("stockbench: %v\n", err)
		}
	}
	return figs
}

// share is process i's share of n things spread over procs processes.
func share(n, procs, i int) int {
	if i < n%procs {
		return n/procs + 1
	}
	return n / procs
}

// showProgress reports the time elapsed as a fraction of planned, about
// ten times a second, until the returned function is called.
func showProgress(progress func(float64), planned time.Duration) func() {
	if progress == nil || planned <= 0 {
		return func() {}
	}
	done := make(chan struct{})
	var wg sync.WaitGroup
	began := time.Now()
	wg.Go(func() {
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-done:
				progress(1)
				return
			case <-tick.C:
				progress(min(float64(time.Since(began))/float64(planned), 1))
			}
		}
	})
	return func() { close(done); wg.Wait() }
}

// workerProc is a running worker process.
type workerProc struct {
	name   string
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	stderr bytes.Buffer // written by exec's goroutine until Wait returns
	msgs   chan message // its stdout's messages, closed at EOF
	waited bool
}

// startProc starts a worker or consumer process, named name, on job j.
func startProc(exe, name string, j job) (*workerProc, error) {
	wp := &workerProc{name: name, msgs: make(chan message, 2)}
	wp.cmd = exec.Command(exe)
	wp.cmd.Env = append(os.Environ(), workerEnv+"=1")
	wp.cmd.Stderr = &wp.stderr
	var err error
	if wp.stdin, err = wp.cmd.StdinPipe(); err != nil {
		return nil, err
	}
	stdout, err := wp.cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	b, err := json.Marshal(j)
	if err != nil {
		return nil, err
	}
	if err := wp.cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting %s: %w", wp.name, err)
	}
	go func() {
		defer close(wp.msgs)
		sc := bufio.NewScanner(stdout)
		sc.Buffer(nil, 1<<30) // a part holds a histogram per worker
		for sc.Scan() {
			var m message
			if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
				m = message{Err: fmt.Sprintf("unreadable output %.200q: %v", sc.Bytes(), err)}
			}
			wp.msgs <- m
		}
	}()
	// The job travels on stdin, not in the arguments: a DSN may hold a
	// password, which ps would show.
	if _, err := wp.stdin.Write(append(b, '\n')); err != nil {
		wp.kill()
		return nil, fmt.Errorf("%s: sending the job: %w", wp.name, err)
	}
	return wp, nil
}

// failure describes why the worker did not send what it should have: its
// error message, else its exit and stderr.
func (wp *workerProc) failure(m message) error {
	if m.Err != "" {
		return fmt.Errorf("%s: %s", wp.name, m.Err)
	}
	err := wp.wait()
	if err == nil {
		err = errors.New("exited without reporting")
	}
	return err
}

// wait waits for the worker to exit; its error carries the end of the
// worker's stderr.
func (wp *workerProc) wait() error {
	if wp.waited {
		return nil
	}
	wp.waited = true
	wp.stdin.Close()
	for range wp.msgs { // to EOF, as the process exits: Wait closes the pipe
	}
	err := wp.cmd.Wait()
	if err != nil {
		msg := strings.TrimSpace(wp.stderr.String())
		if len(msg) > 500 {
			msg = "…" + msg[len(msg)-500:]
		}
		return fmt.Errorf("%s: %v: %s", wp.name, err, msg)
	}
	return nil
}

// kill ends a worker that has not been waited for.
func (wp *workerProc) kill() {
	if wp.waited {
		return
	}
	wp.cmd.Process.Kill()
	wp.wait()
}

// writeProcs reports, for each strategy and worker count run at several
// process counts, each one's throughput as a share of the one-process
// figure.
func writeProcs(w io.Writer, results []*bench.Result) error {
	type key struct {
		target  string
		workers int
		rate    float64
	}
	var order []key
	by := map[key][]*bench.Result{}
	for _, r := range results {
		if r.Counterexample {
			continue // its figure is not the point; the audit's verdict is
		}
		k := key{r.Target, r.Workload.Workers, r.Workload.Rate}
		if by[k] == nil {
			order = append(order, k)
		}
		by[k] = append(by[k], r)
	}
	var b strings.Builder
	for _, k := range order {
		rs := by[k]
		i := slices.IndexFunc(rs, func(r *bench.Result) bool { return r.Procs <= 1 })
		if i < 0 || len(rs) < 2 || rs[i].Throughput <= 0 {
			continue
		}
		one := rs[i]
		fmt.Fprintf(&b, "  %s ×%d", k.target, k.workers)
		if k.rate > 0 {
			fmt.Fprintf(&b, " @%s/s", commas(k.rate))
		}
		fmt.Fprintf(&b, ": 1 process %s/s", commas(one.Throughput))
		for _, r := range rs {
			if r == one {
				continue
			}
			fmt.Fprintf(&b, "; %d processes %s/s = %.2f×", r.Procs, commas(r.Throughput), r.Throughput/one.Throughput)
			if !r.Sound() {
				b.WriteString(" (UNSOUND)")
			}
		}
		b.WriteString("\n")
	}
	if b.Len() == 0 {
		return nil
	}
	_, err := fmt.Fprintf(w, "\nprocs: throughput over several processes against one (decrements/s):\n%s", b.String())
	return err
}
