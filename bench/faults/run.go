package faults

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/stockguard/stockguard"
	"github.com/stockguard/stockguard/bench"
	"github.com/stockguard/stockguard/bench/replicatargets"
)

// ErrNotApplicable is returned by Run when the fault cannot strike the
// target's servers (see Applies).
var ErrNotApplicable = errors.New("faults: the fault does not apply to the target's servers")

// Defaults of Config.
const (
	DefaultBuyers   = 32
	DefaultDuration = 10 * time.Second
	DefaultTimeout  = time.Second
)

// The run's SKUs: hot never runs out, scarce sells out, so that both a
// steady stream of takes and refusals at zero meet the fault.
const (
	hotSKU       = "hot"
	scarceSKU    = "scarce"
	hotStock     = 1_000_000_000
	scarceStock  = 2_000
	scarceShare  = 0.25 // of requests that include the scarce SKU
	twoLineShare = 0.3  // of orders that take both SKUs at once
)

var skus = [2]string{hotSKU, scarceSKU}

// Config shapes a run. The zero value runs with the defaults.
type Config struct {
	// Buyers is the number of concurrent buyers, spread over two app
	// instances. Default DefaultBuyers.
	Buyers int
	// Duration is how long buyers run at least; the fault starts after a
	// quarter of it, and the run goes on for a quarter of it after the
	// fault ends. Default DefaultDuration.
	Duration time.Duration
	// Timeout is each call's deadline, except under the deadline fault.
	// Default DefaultTimeout.
	Timeout time.Duration
	// Seed seeds the buyers' choices.
	Seed uint64
	// Failovers is how many failovers a fault of replicas (failover,
	// partition-master) strikes in a row in one run. Default 1.
	Failovers int
	// Concurrent says other runs share the process: the goroutines it has
	// after the run cannot be told apart, so they are not checked (the
	// connections through the proxy still are).
	Concurrent bool
}

func (c Config) withDefaults() (Config, error) {
	if c.Buyers < 0 || c.Duration < 0 || c.Timeout < 0 || c.Failovers < 0 {
		return c, fmt.Errorf("%w: faults: negative Config field %+v", stockguard.ErrInvalidRequest, c)
	}
	if c.Buyers == 0 {
		c.Buyers = DefaultBuyers
	}
	if c.Duration == 0 {
		c.Duration = DefaultDuration
	}
	if c.Timeout == 0 {
		c.Timeout = DefaultTimeout
	}
	if c.Failovers == 0 {
		c.Failovers = 1
	}
	return c, nil
}

// op is one call of the recorded history.
type op struct {
	start, end time.Duration // since the run's start
	qty        [2]int64      // units asked of each of skus (0: not in the request)
	buyer, seq int32
	order      bool // Take under the ID orderID(buyer, seq), else Decrement
	kind       bench.Kind
	left       bool // the call's context had ended when it was answered
}

func orderID(buyer, seq int32) string { return fmt.Sprintf("b%d-%d", buyer, seq) }

// Run strikes target t with fault f on e's servers while cfg.Buyers buyers
// take stock, then reconciles and audits (see Report). Buyers on a target
// whose instances implement stockguard.Orders alternate: half take orders
// under fresh IDs (1 or 2 lines), half call Decrement.
//
// It returns an error wrapping bench.ErrMissingBackend when e lacks a
// server t needs, stockguard.ErrInvalidRequest for a bad cfg, or the error
// of setting up the target; a Report with problems is not an error.
func Run(ctx context.Context, e *Env, t bench.Target, f Fault, cfg Config) (*Report, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	if len(t.Needs) == 0 {
		return nil, fmt.Errorf("faults: %s: %w: it needs no server, so there is none to strike", t.Name, bench.ErrMissingBackend)
	}
	if err := e.has(t.Needs); err != nil {
		return nil, fmt.Errorf("faults: %s: %w", t.Name, err)
	}
	if !Applies(f, t) {
		return nil, fmt.Errorf("faults: %s under %s: %w", t.Name, f.Name, ErrNotApplicable)
	}
	rep := &Report{Target: t.Name, Fault: f.Name, Buyers: cfg.Buyers, Kinds: map[string]int64{},
		// Without a replica's acknowledgement, a failover loses what only
		// the master had: expected, shown as a counterexample is.
		Counterexample: t.Counterexample || f.replicas && !replicatargets.Acked(t.Name)}
	goroutines := countGoroutines()
	conns, closeConns, err := e.open(t.Needs, 2*cfg.Buyers+16)
	if err != nil {
		return nil, err
	}
	ns := newNamespace()
	store, err := t.Open(ctx, conns, ns)
	if err != nil {
		closeConns()
		return nil, fmt.Errorf("faults: %s: open: %w", t.Name, err)
	}
	insts := make([]stockguard.Inventory, 2)
	var orders []stockguard.Orders
	release := func() {
		for _, inv := range insts {
			if c, ok := inv.(io.Closer); ok {
				c.Close()
			}
		}
		if store.Close != nil {
			cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
			store.Close(cctx)
			cancel()
		}
		closeConns()
	}
	for i := range insts {
		if insts[i], err = store.New(); err != nil {
			release()
			return nil, fmt.Errorf("faults: %s: instance: %w", t.Name, err)
		}
		if o, ok := insts[i].(stockguard.Orders); ok {
			orders = append(orders, o)
		}
	}
	rep.Orders = len(orders) == len(insts)
	// SetStock overwrites, so it is repeated while unconfirmed: with a
	// replica's acknowledgement, right after the previous run's failover on
	// a loaded machine, the replica can take longer than the ack's timeout.
	sctx, cancel := context.WithTimeout(ctx, time.Minute)
	for i, sku := range skus {
		_, err := retry(sctx, func(ctx context.Context) (struct{}, error) {
			return struct{}{}, insts[0].SetStock(ctx, sku, [2]int64{hotStock, scarceStock}[i])
		})
		if err != nil {
			cancel()
			release()
			return nil, fmt.Errorf("faults: %s: stocking: %w", t.Name, err)
		}
	}
	cancel()

	var fence *fencing
	if f.replicas {
		if fence, err = newFencing(t, conns, ns); err != nil {
			release()
			return nil, fmt.Errorf("faults: %s: locks: %w", t.Name, err)
		}
	}
	srv := e.servers[t.Needs[0]]
	if f.back {
		srv = e.servers[t.Needs[1]]
	}
	r := &runner{fence: fence, cfg: cfg, insts: insts, orders: rep.Orders, sc: &scene{srv: srv, repeat: cfg.Failovers}, rep: rep, everyOrder: f.replicas}
	r.sc.usable = r.usable
	r.execute(ctx, f, store.Raw)
	r.settle(ctx)

	actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Minute)
	defer cancel()
	if err := r.awaitServer(actx, srv); err != nil {
		rep.problem("the server did not come back: %v", err)
	} else {
		r.reconcile(actx)
		r.audit(actx, store.Raw)
		if store.Ledger != nil {
			r.ledger(actx, store.Ledger)
		}
		if store.Stats != nil {
			rep.Stats = store.Stats()
		}
		if fence != nil {
			fence.check(rep)
		}
	}
	release()
	if cfg.Concurrent {
		goroutines = math.MaxInt
	}
	r.checkLeaks(goroutines, srv.proxy)
	return rep, nil
}

// abandonedGrace bounds how long after its caller left, told "outcome
// unknown", a write may still land: mysqllock lets a statement whose caller
// left run on for a second before ending it the driver's way.
const abandonedGrace = 2 * time.Second

// severedGrace bounds how long a server may go on committing a write whose
// connection was lost under it (the client told "outcome unknown").
const severedGrace = 200 * time.Millisecond

// settle waits until no write whose caller was answered "outcome unknown"
// can still land. One landing during the reconcile or the audit would be
// judged not applied and then counted as lost, or make Stock and the
// backend's raw value disagree.
func (r *runner) settle(ctx context.Context) {
	until := time.Duration(-1)
	for _, h := range r.history {
		for _, o := range h {
			switch {
			case o.kind != bench.KindOutcomeUnknown:
			case o.left:
				until = max(until, o.end+abandonedGrace)
			default:
				until = max(until, o.end+severedGrace)
			}
		}
	}
	if until >= 0 {
		sleep(ctx, until-r.since())
	}
}

// runner is one run's state.
type runner struct {
	cfg    Config
	insts  []stockguard.Inventory
	orders bool
	sc     *scene
	rep    *Report
	base   time.Time
	stop   atomic.Bool

	history [][]op // per buyer, then the probes of usable
	probes  []op
	// fence, for a fault of replicas, takes locks beside the buyers.
	fence *fencing
	// everyOrder makes reconcile check every acknowledged order, not a
	// sample: after a failover, each one forgotten is counted.
	everyOrder bool
	// applied holds the unknown orders reconcile found applied, by buyer
	// and sequence number.
	applied map[[2]int32]bool
	// minRaw is the lowest stock of the scarce SKU read from the backend
	// during the run.
	minRaw atomic.Int64
	mu     sync.Mutex // guards rep.Problems while buyers run
}

func (r *runner) since() time.Duration { return time.Since(r.base) }

// execute runs the buyers, strikes the fault in the middle of the run, and
// stops the buyers a quarter of the duration after the fault ended.
func (r *runner) execute(ctx context.Context, f Fault, raw func(context.Context, string) (int64, error)) {
	d := r.cfg.Duration
	r.base = time.Now()
	r.sc.since = r.since
	r.history = make([][]op, r.cfg.Buyers)
	r.minRaw.Store(scarceStock)
	var wg sync.WaitGroup
	for b := range r.cfg.Buyers {
		wg.Go(func() { r.history[b] = r.buy(ctx, int32(b)) })
	}
	if raw != nil {
		wg.Go(func() { r.watch(ctx, raw) })
	}
	if r.fence != nil {
		wg.Go(func() { r.fence.run(ctx, r.cfg.Timeout, r.stop.Load) })
	}
	sleep(ctx, d/4)
	r.rep.FaultStart = r.since()
	n, err := f.strike(ctx, r.sc, f.span(d))
	r.rep.FaultEnd = r.since()
	r.rep.Injected = n
	if err != nil {
		r.problem("striking %s: %v", f.Name, err)
	}
	sleep(ctx, max(d-r.since(), d/4))
	r.stop.Store(true)
	wg.Wait()
	r.history = append(r.history, r.probes)
	r.rep.Elapsed = r.since()
	r.rep.Promotion, r.rep.Usable = slices.Max(append(r.sc.promotions, 0)), slices.Max(append(r.sc.usables, 0))
}

// usableWithin bounds how long after a failover the new master must
// acknowledge a take of every SKU: a lock the old master held (and the
// replica had) expires within redislock's TTL; longer means a wedged lock.
const usableWithin = 30 * time.Second

// usable takes one unit of each SKU through the first instance, call
// after call, until the new master acknowledges it (or refuses it as sold
// out: it answered), recording each call in the history as a buyer's, and
// records how long after at (the failover's start) the last SKU answered.
func (r *runner) usable(ctx context.Context, at time.Duration) error {
	buyer := int32(r.cfg.Buyers)
	deadline := time.Now().Add(usableWithin)
	for i := range skus {
		for {
			o := op{buyer: buyer, seq: int32(len(r.probes))}
			o.qty[i] = 1
			cctx, cancel := context.WithTimeout(ctx, r.cfg.Timeout)
			o.start = r.since()
			err := r.call(cctx, r.insts[0], nil, o)
			o.end = r.since()
			cancel()
			o.kind = bench.Classify(err)
			r.probes = append(r.probes, o)
			if o.kind == bench.KindOK || o.kind == bench.KindInsufficient {
				break
			}
			if o.kind == bench.KindOther {
				r.problem("an error outside the contract: %v", err)
			}
			if time.Now().After(deadline) || ctx.Err() != nil {
				r.problem("%s not usable %v after the failover (wedged?): %v", skus[i], usableWithin, err)
				return nil
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	if r.fence != nil {
		if err := r.fence.usable(ctx, r.cfg.Timeout, deadline); err != nil {
			r.problem("%v", err)
			return nil
		}
	}
	r.sc.usables = append(r.sc.usables, r.since()-at)
	return nil
}

// watch reads the scarce SKU's stock straight from the backend every 20 ms
// while the buyers run, to catch it below zero mid-run; failed reads (the
// server is struck) are skipped.
func (r *runner) watch(ctx context.Context, raw func(context.Context, string) (int64, error)) {
	for !r.stop.Load() && ctx.Err() == nil {
		cctx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
		v, err := raw(cctx, scarceSKU)
		cancel()
		if err == nil && v < r.minRaw.Load() {
			r.minRaw.Store(v)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// buy is one buyer's loop; it returns the buyer's history.
func (r *runner) buy(ctx context.Context, b int32) []op {
	rng := rand.New(rand.NewPCG(r.cfg.Seed, uint64(b)))
	inv := r.insts[int(b)%len(r.insts)]
	var ord stockguard.Orders
	if r.orders && b%2 == 0 {
		ord = inv.(stockguard.Orders)
	}
	var hist []op
	for seq := int32(0); !r.stop.Load() && ctx.Err() == nil; seq++ {
		o := op{buyer: b, seq: seq, order: ord != nil}
		switch {
		case ord != nil && rng.Float64() < twoLineShare:
			o.qty = [2]int64{1 + rng.Int64N(3), 1 + rng.Int64N(3)}
		case rng.Float64() < scarceShare:
			o.qty[1] = 1 + rng.Int64N(3)
		default:
			o.qty[0] = 1 + rng.Int64N(3)
		}
		timeout := r.cfg.Timeout
		if r.sc.tiny.Load() {
			// log-uniform over 1µs–1ms
			timeout = time.Duration(math.Pow(10, 3+3*rng.Float64()))
		}
		cctx, cancel := context.WithTimeout(ctx, timeout)
		o.start = r.since()
		err := r.call(cctx, inv, ord, o)
		o.end = r.since()
		o.left = cctx.Err() != nil
		cancel()
		o.kind = bench.Classify(err)
		hist = append(hist, o)
		if o.kind == bench.KindContention && r.sc.downSince(o.start) {
			r.problem("ErrContention while the server was down, e.g.: %v", err)
		}
		switch o.kind {
		case bench.KindOK, bench.KindInsufficient:
		case bench.KindOther:
			r.problem("an error outside the contract: %v", err)
			fallthrough
		default:
			// A client backs off after a failure, as real ones do; it also
			// keeps buyers from spinning on a server that is down.
			time.Sleep(time.Millisecond + time.Duration(rng.Int64N(int64(4*time.Millisecond))))
		}
	}
	return hist
}

// call makes one request; a panic is recorded and reported as an error
// outside the contract.
func (r *runner) call(ctx context.Context, inv stockguard.Inventory, ord stockguard.Orders, o op) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("panic: %v", p)
		}
	}()
	if o.order {
		var lines []stockguard.Line
		for i, q := range o.qty {
			if q > 0 {
				lines = append(lines, stockguard.Line{SKU: skus[i], Qty: q})
			}
		}
		return ord.Take(ctx, orderID(o.buyer, o.seq), lines...)
	}
	i := 0
	if o.qty[0] == 0 {
		i = 1
	}
	return inv.Decrement(ctx, skus[i], o.qty[i])
}

// problem records something the run found wrong; the first few of a kind
// are kept.
func (r *runner) problem(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.rep.problem(format, args...)
}

// awaitServer waits until the server answers the strategy again: a restarted
// server may still be recovering when the buyers stop.
func (r *runner) awaitServer(ctx context.Context, srv *server) error {
	var err error
	for {
		if err = srv.ready(ctx); err == nil {
			if _, err = r.insts[0].Stock(ctx, hotSKU); err == nil {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return errors.Join(ctx.Err(), err)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// retry calls f until it returns an error that says the backend answered
// (nil included) or ctx ends; the servers have just been struck, and a
// check must not mistake a lingering failure for a finding.
func retry[T any](ctx context.Context, f func(context.Context) (T, error)) (T, error) {
	for {
		cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		v, err := f(cctx)
		cancel()
		switch {
		case err == nil, ctx.Err() != nil:
			return v, err
		case errors.Is(err, stockguard.ErrUnavailable), errors.Is(err, stockguard.ErrContention),
			errors.Is(err, stockguard.ErrOutcomeUnknown), errors.Is(err, context.DeadlineExceeded):
			time.Sleep(20 * time.Millisecond)
		default:
			return v, err
		}
	}
}
