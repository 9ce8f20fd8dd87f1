package bench

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"

	"github.com/stockguard/stockguard"
	"github.com/stockguard/stockguard/strategy"
)

// Option configures Run.
type Option func(*runOptions)

type runOptions struct {
	progress   func(done float64)
	begin, end func()
	servers    []Server // whose CPU to measure (WithServerCPU)
	needs      []string // the target's backends, whose servers are measured
}

// WithProgress makes Run call f with the fraction of the run done so far
// (0…1), about ten times a second while measuring, from its own goroutine.
// Default: no progress reports.
func WithProgress(f func(done float64)) Option {
	return func(o *runOptions) { o.progress = f }
}

// WithWindow makes Run call begin as the measured window opens (after
// set-up and warm-up) and end once its last request has returned, both from
// Run's own goroutine — go test -bench passes b.StartTimer and b.StopTimer
// so that it times, and sizes b.N on, the measured window only. Default:
// no calls.
func WithWindow(begin, end func()) Option {
	return func(o *runOptions) { o.begin, o.end = begin, end }
}

// Run phases, read by every worker before each request.
const (
	phaseWarm int32 = iota
	phaseMeasure
	phaseStop
)

// Latencies are tracked from 1 ns to a minute at 3 significant digits;
// slower requests are recorded as a minute (and reported exactly as Max).
const maxTracked = int64(time.Minute)

// perWorkerCells bounds workers × SKUs for per-worker acknowledgement
// tallies; above it the tallies are shared atomics (many SKUs spread the
// writes, so they rarely collide).
const perWorkerCells = 1 << 22

// Run stocks a fresh store of target t on servers s, runs workload w
// against it from w.Workers goroutines over w.Instances instances, then
// audits the store. The store is removed afterwards.
//
// A Checkout runs only when the target's instances implement
// stockguard.Orders, and a target marked OrdersOnly only under a Checkout:
// otherwise Run returns an error wrapping ErrSkipped and no Result.
//
// It returns an error wrapping ErrInvalidWorkload or ErrMissingBackend
// before doing anything, or the error of setting up the store. An audit
// that cannot complete (a stock it cannot read, an order Order cannot
// report) makes the Result unsound, with the reason in Audit.Failed.
// When ctx ends during the run, the run stops early, is audited anyway and
// the Result comes back with Interrupted set, together with ctx's error.
func Run(ctx context.Context, t Target, s Servers, w Workload, opts ...Option) (*Result, error) {
	if err := w.Validate(); err != nil {
		return nil, err
	}
	if err := t.check(s); err != nil {
		return nil, err
	}
	if t.OrdersOnly && w.Shape != Checkout {
		return nil, fmt.Errorf("bench: %w: %s breaks only whole orders (run it with the checkout workload)", ErrSkipped, t.Name)
	}
	var o runOptions
	for _, opt := range opts {
		opt(&o)
	}
	store, err := t.Open(ctx, s, newNamespace())
	if err != nil {
		return nil, fmt.Errorf("bench: %s: open: %w", t.Name, err)
	}
	if store.Close != nil {
		defer func() {
			cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
			defer cancel()
			store.Close(cctx)
		}()
	}
	insts := make([]stockguard.Inventory, min(w.Instances, w.Workers))
	for i := range insts {
		if insts[i], err = store.New(); err != nil {
			return nil, fmt.Errorf("bench: %s: instance %d: %w", t.Name, i, err)
		}
		if c, ok := insts[i].(io.Closer); ok {
			defer c.Close()
		}
	}
	o.needs = t.Needs
	r := newRun(w)
	if r.co != nil {
		for _, inv := range insts {
			_, ok := inv.(stockguard.Orders)
			switch {
			case !ok:
				return nil, fmt.Errorf("bench: %w: %s does not implement stockguard.Orders", ErrSkipped, t.Name)
			case !t.Orders:
				return nil, fmt.Errorf("bench: %s implements stockguard.Orders: mark it Orders, so that stockbench plans its checkout", t.Name)
			}
		}
	}
	if err := r.stock(ctx, insts[0]); err != nil {
		return nil, fmt.Errorf("bench: %s: stocking: %w", t.Name, err)
	}
	res := r.execute(ctx, insts, o)
	res.Procs = 1
	res, err = r.conclude(ctx, t, res, insts[0], store.Raw)
	withStats(res, store)
	return res, err
}

// withStats puts the store's own figures in res, taken after the audit (a
// tiered target's audit drains its queue: its lag then counts every entry).
func withStats(res *Result, store *Store) {
	if res != nil && store.Stats != nil {
		res.Stats = store.Stats()
	}
}

// conclude labels res as t's and audits the store through inv and raw,
// even when ctx has ended. An audit that cannot complete is a finding of
// the audit (Audit.Failed), not an error.
func (r *run) conclude(ctx context.Context, t Target, res *Result, inv stockguard.Inventory, raw func(context.Context, string) (int64, error)) (*Result, error) {
	res.Target, res.Counterexample, res.Needs = t.Name, t.Counterexample, t.Needs
	actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Minute)
	defer cancel()
	if r.co != nil {
		res.Audit = r.auditOrders(actx, inv.(stockguard.Orders), raw)
	} else {
		res.Audit = r.audit(actx, inv, raw)
	}
	if res.Interrupted {
		return res, fmt.Errorf("bench: %s: interrupted: %w", t.Name, strategy.Canceled(ctx))
	}
	return res, nil
}

// run is the shared state of one Run. Workers write only to their own
// worker value and, rarely, to the atomics here.
type run struct {
	w Workload
	// first and count are the workers this process runs: ids first…
	// first+count-1 of w.Workers (all of them, but in a split run; see
	// Attach).
	first, count int
	skus         []string // sale SKUs, then the warm-up SKUs (flash), the drain SKU (steady) or the sold-out SKU (checkout)
	sale         int      // number of sale SKUs
	warm         int      // index of the first warm-up SKU, 0 when there are none
	initial      []int64  // stock each SKU starts with
	phase        atomic.Int32
	// stopped is closed when the run stops, to wake open-loop workers
	// waiting for a request's start.
	stopped chan struct{}
	// base is the run's clock origin. Workers read the time as
	// time.Since(base): one monotonic clock read, where time.Now makes two
	// (wall and monotonic) — the largest cost of the hot path.
	base time.Time
	// start is when measurement began, since base.
	start time.Duration

	acked      []atomic.Int64 // units acknowledged per SKU, when not tallied per worker
	unknown    []atomic.Int64 // units of requests that ended ErrOutcomeUnknown, per SKU
	minRefused []atomic.Int64 // smallest qty refused as insufficient per SKU, 0 if none
	soldOut    []atomic.Bool  // sale SKUs refused a request of QtyMin: nothing more can sell
	soldCount  atomic.Int64
	allSold    chan struct{}
	workers    []*worker
	co         *checkout // nil unless the workload is a Checkout
}

func newRun(w Workload) *run {
	r := &run{w: w, count: w.Workers, sale: w.SKUs, allSold: make(chan struct{}), stopped: make(chan struct{})}
	n := w.SKUs
	short := w.Shape == Checkout && w.Orders.Lines >= 2 && w.Orders.ShortShare > 0
	switch {
	case w.Shape == Flash && w.Warmup > 0:
		n *= 2
		r.warm = r.sale
	case short, w.drains():
		n++
	}
	r.skus = make([]string, n)
	r.initial = make([]int64, n)
	for i := range r.skus {
		switch {
		case i < r.sale:
			r.skus[i] = "sku-" + strconv.Itoa(i)
			r.initial[i] = w.InitialStock()
		case short:
			r.skus[i] = "sold-out" // carts ending with it must be refused whole
		case w.drains():
			r.skus[i] = "drain"
			r.initial[i] = w.drainStock()
		default:
			r.skus[i] = "warm-" + strconv.Itoa(i-r.sale)
			r.initial[i] = DefaultSteadyStock
		}
	}
	if w.Workers*n > perWorkerCells {
		r.acked = make([]atomic.Int64, n)
	}
	r.unknown = make([]atomic.Int64, n)
	r.minRefused = make([]atomic.Int64, n)
	r.soldOut = make([]atomic.Bool, r.sale)
	if w.Shape == Checkout {
		r.co = newCheckout(n)
		if short {
			r.co.soldOut = r.sale
		}
	}
	return r
}

// stock sets every SKU's initial stock.
func (r *run) stock(ctx context.Context, inv stockguard.Inventory) error {
	return parallel(len(r.skus), func(i int) error {
		return inv.SetStock(ctx, r.skus[i], r.initial[i])
	})
}

// execute runs the workers through warm-up and measurement and collects
// their figures.
func (r *run) execute(ctx context.Context, insts []stockguard.Inventory, o runOptions) *Result {
	w := r.w
	r.workers = make([]*worker, r.count)
	quota, extra := int64(-1), int64(0)
	if w.Ops > 0 {
		quota, extra = w.Ops/int64(w.Workers), w.Ops%int64(w.Workers)
	}
	for i := range r.workers {
		// Quotas, random sequences and open-loop timetables go by the
		// worker's id in the whole run, so that the shares of a split run
		// add up to the run.
		id := r.first + i
		q := quota
		if int64(id) < extra {
			q++
		}
		r.workers[i] = newWorker(r, id, insts[i%len(insts)], q)
	}

	// Retries count from the start of the measured phase: without a
	// warm-up that is before the first request, not after the workers
	// have started (a late read would leave their first retries out).
	var retries0 int64
	if w.Warmup > 0 {
		r.phase.Store(phaseWarm)
	} else {
		r.phase.Store(phaseMeasure)
		retries0 = sumRetries(insts)
	}
	stopWatch := context.AfterFunc(ctx, func() { r.phase.Store(phaseStop) })
	defer stopWatch()

	r.base = time.Now()
	var wg sync.WaitGroup
	finished := make(chan struct{})
	for _, wk := range r.workers {
		if wk.quota == 0 {
			continue // more workers than ops
		}
		if wk.ow != nil {
			wg.Go(func() { wk.ordersLoop(ctx) })
		} else {
			wg.Go(func() { wk.loop(ctx) })
		}
	}
	go func() { wg.Wait(); close(finished) }()

	planned := w.Warmup + w.Duration
	var progressDone, progressStopped chan struct{}
	if o.progress != nil && w.Duration > 0 {
		progressDone, progressStopped = make(chan struct{}), make(chan struct{})
		go func() {
			defer close(progressStopped)
			tick := time.NewTicker(100 * time.Millisecond)
			defer tick.Stop()
			for {
				select {
				case <-progressDone:
					o.progress(1)
					return
				case <-tick.C:
					o.progress(min(float64(time.Since(r.base))/float64(planned), 1))
				}
			}
		}()
	}

	if w.Warmup > 0 {
		timer := time.NewTimer(w.Warmup)
		select {
		case <-timer.C:
		case <-ctx.Done():
		case <-finished:
		}
		timer.Stop()
		retries0 = sumRetries(insts)
	}
	cpu := startCPU(ctx, o.servers, o.needs)
	if o.begin != nil {
		o.begin()
	}
	// Without a warm-up the measured phase began at base. With one, the
	// start is read before the phase turns: a worker that sees the measured
	// phase then ends after it, also when this goroutine is descheduled
	// while the workers finish every measured request.
	if w.Warmup > 0 {
		r.start = time.Since(r.base)
		r.phase.CompareAndSwap(phaseWarm, phaseMeasure)
	}
	if r.phase.Load() == phaseMeasure {
		r.measure(ctx, r.start, finished)
	}
	r.phase.Store(phaseStop)
	close(r.stopped)
	<-finished
	if o.end != nil {
		o.end()
	}
	res := r.collect(r.start)
	cpu.stop(ctx, res)
	res.Retries = sumRetries(insts) - retries0
	if res.Attempts > 0 {
		res.RetriesPerOp = float64(res.Retries) / float64(res.Attempts)
	}
	if progressDone != nil {
		close(progressDone)
		<-progressStopped
	}
	res.Interrupted = ctx.Err() != nil
	res.Workload = w
	return res
}

// measure waits for the end of the measured window: the duration, the op
// count, a flash sale's sell-out (plus a short tail), or ctx.
func (r *run) measure(ctx context.Context, start time.Duration, finished <-chan struct{}) {
	w := r.w
	var deadline <-chan time.Time
	if w.Duration > 0 {
		t := time.NewTimer(w.Duration)
		defer t.Stop()
		deadline = t.C
	}
	var sold <-chan struct{}
	if w.Shape == Flash {
		sold = r.allSold
	}
	select {
	case <-deadline:
	case <-finished:
	case <-ctx.Done():
	case <-sold:
		// Keep going briefly to measure refusals after the sell-out.
		sofar := time.Since(r.base) - start
		tail := max(sofar/10, 50*time.Millisecond)
		if w.Duration > 0 {
			tail = min(tail, max(w.Duration-sofar, 0))
		}
		t := time.NewTimer(tail)
		select {
		case <-t.C:
		case <-finished:
		case <-ctx.Done():
		}
		t.Stop()
	}
}

// collect merges the workers' figures; measurement began at start (since
// r.base).
func (r *run) collect(start time.Duration) *Result {
	res := &Result{Errors: map[string]int64{}}
	hist := newHistogram()
	var last, lastSale time.Duration
	var maxLat int64
	for _, wk := range r.workers {
		hist.Merge(wk.hist)
		maxLat = max(maxLat, wk.max)
		res.Attempts += wk.attempts
		res.Units += wk.units
		res.Successes += wk.counts[1][KindOK]
		for k := KindOutcomeUnknown; k < numKinds; k++ {
			if n := wk.counts[1][k]; n > 0 {
				res.Errors[k.String()] += n
			}
		}
		res.OtherErrors = appendSamples(res.OtherErrors, wk.others...)
		if wk.ow != nil {
			res.Lines += wk.ow.lines
		}
		last = max(last, wk.lastEnd)
		lastSale = max(lastSale, wk.lastSuccess)
	}
	if last > start {
		res.Elapsed = last - start
	}
	if res.Attempts > 0 {
		// A histogram quantile is the top of its bucket (within 0.1%), which
		// can exceed the exact maximum: cap it there.
		q := func(p float64) time.Duration { return time.Duration(min(hist.ValueAtQuantile(p), maxLat)) }
		res.Latency = Latency{
			P50: q(50), P90: q(90), P99: q(99), P999: q(99.9),
			Max:  time.Duration(maxLat),
			Mean: time.Duration(hist.Mean()),
		}
	}
	select {
	case <-r.allSold:
		res.SoldOut = true
		if lastSale > start {
			res.SellOut = lastSale - start
		}
	default:
	}
	window := res.Elapsed
	if res.SoldOut && res.SellOut > 0 {
		window = res.SellOut
	}
	if window > 0 {
		res.Throughput = float64(res.Successes) / window.Seconds()
	}
	if res.Elapsed > 0 {
		res.AttemptRate = float64(res.Attempts) / res.Elapsed.Seconds()
		res.LineRate = float64(res.Lines) / res.Elapsed.Seconds()
	}
	return res
}

func newHistogram() *hdrhistogram.Histogram { return hdrhistogram.New(1, maxTracked, 3) }

// sumRetries adds up the retry counters of the instances that have one.
func sumRetries(insts []stockguard.Inventory) int64 {
	var n int64
	for _, inv := range insts {
		if rc, ok := inv.(strategy.RetryCounter); ok {
			n += rc.Retries()
		}
	}
	return n
}

// worker is one buyer. Its fields are written only by its own goroutine
// until the run ends.
type worker struct {
	r     *run
	inv   stockguard.Inventory
	rng   *rand.Rand
	zipf  *rand.Zipf
	warm  int   // index offset of the warm-up SKUs (flash), else 0
	drain int   // drain requests left (see Workload.Drain)
	qmin  int64 // request quantity: qmin + [0, qspan)
	qspan int64
	quota int64 // measured attempts left, -1 for no limit
	sched schedule

	acked []int64      // units acknowledged per SKU, nil when the run tallies them shared
	ow    *orderWorker // Checkout state, nil for other workloads
	hist  *hdrhistogram.Histogram
	max   int64
	// counts[m][k]: outcomes of kind k, m = 1 for measured requests.
	counts      [2][numKinds]int64
	attempts    int64
	units       int64
	lastEnd     time.Duration // since run.base
	lastSuccess time.Duration
	others      []string

	_ [64]byte // keep neighbouring workers' hot fields off this cache line
}

func newWorker(r *run, id int, inv stockguard.Inventory, quota int64) *worker {
	w := r.w
	wk := &worker{
		r: r, inv: inv, quota: quota,
		rng:  rand.New(rand.NewPCG(w.Seed, uint64(id))),
		qmin: w.QtyMin, qspan: w.QtyMax - w.QtyMin + 1,
		hist: newHistogram(), sched: newSchedule(w, id),
	}
	if w.Skew.Zipf > 1 && w.SKUs > 1 {
		wk.zipf = rand.NewZipf(wk.rng, w.Skew.Zipf, 1, uint64(w.SKUs-1))
	}
	if r.co != nil {
		ord, _ := inv.(stockguard.Orders) // Run checked every instance
		wk.ow = &orderWorker{ord: ord, id: id}
		return wk
	}
	wk.warm = r.warm
	if w.drains() {
		wk.drain = w.Drain
	}
	if r.acked == nil {
		// A cache line of padding in front keeps this tally off the line
		// of whatever the allocator placed before it (another worker's
		// tally, typically): shared lines would cost more than the harness.
		buf := make([]int64, cacheLineWords+len(r.skus))
		wk.acked = buf[cacheLineWords:]
	}
	return wk
}

// pick returns the index of the sale SKU of the next request.
func (wk *worker) pick() int {
	switch {
	case wk.zipf != nil:
		return int(wk.zipf.Uint64())
	case wk.r.sale == 1:
		return 0
	}
	return wk.rng.IntN(wk.r.sale)
}

func (wk *worker) qty() int64 {
	if wk.qspan == 1 {
		return wk.qmin
	}
	return wk.qmin + wk.rng.Int64N(wk.qspan)
}

// loop is the hot path: no locks, no allocations, one clock read per
// request — closed-loop, a request's latency runs from the end of the
// previous one, which adds only the few nanoseconds of picking a SKU and a
// quantity; open-loop, from the start the schedule intended for it (see
// schedule).
func (wk *worker) loop(ctx context.Context) {
	r := wk.r
	base := r.base
	prev := time.Since(base)
	for {
		if wk.sched.open() {
			var ok bool
			if prev, ok = wk.sched.wait(base, r.stopped); !ok {
				return
			}
		}
		ph := r.phase.Load()
		if ph == phaseStop {
			return
		}
		m := 0
		var i int
		var q int64
		if wk.drain > 0 {
			wk.drain--
			i, q = r.sale, drainQty(r.w.Drain-wk.drain-1)
		} else {
			i, q = wk.pick(), wk.qty()
			if ph != phaseMeasure {
				i += wk.warm
			}
		}
		if ph == phaseMeasure {
			m = 1
		}
		err := wk.inv.Decrement(ctx, r.skus[i], q)
		now := time.Since(base)
		lat := int64(now - prev)
		prev = now

		k := Classify(err)
		wk.counts[m][k]++
		switch k {
		case KindOK:
			if wk.acked != nil {
				wk.acked[i] += q
			} else {
				r.acked[i].Add(q)
			}
		case KindOutcomeUnknown:
			r.unknown[i].Add(q)
		case KindInsufficient:
			r.refused(i, q)
		case KindOther:
			if len(wk.others) < maxSamples { // err.Error() allocates
				wk.others = appendSamples(wk.others, err.Error())
			}
		}
		if m == 0 {
			continue
		}
		wk.hist.RecordValue(min(lat, maxTracked))
		wk.max = max(wk.max, lat)
		wk.attempts++
		wk.lastEnd = now
		if k == KindOK {
			wk.units += q
			wk.lastSuccess = now
		}
		if wk.quota > 0 {
			if wk.quota--; wk.quota == 0 {
				return
			}
		}
	}
}

// refused records that a request of q units of SKU i was refused as
// insufficient.
func (r *run) refused(i int, q int64) {
	for {
		cur := r.minRefused[i].Load()
		if (cur != 0 && cur <= q) || r.minRefused[i].CompareAndSwap(cur, q) {
			break
		}
	}
	if i < r.sale && q == r.w.QtyMin && !r.soldOut[i].Load() && !r.soldOut[i].Swap(true) {
		if r.soldCount.Add(1) == int64(r.sale) {
			close(r.allSold)
		}
	}
}

// cacheLineWords is a cache line's worth of int64s.
const cacheLineWords = 64 / 8

// maxSamples bounds the distinct error messages kept per run.
const maxSamples = 5

// appendSamples adds the messages not yet in samples, up to maxSamples.
func appendSamples(samples []string, msgs ...string) []string {
next:
	for _, m := range msgs {
		if len(samples) >= maxSamples {
			break
		}
		for _, s := range samples {
			if s == m {
				continue next
			}
		}
		samples = append(samples, m)
	}
	return samples
}

// parallel calls f(0…n-1) from up to 16 goroutines and returns the first
// error.
func parallel(n int, f func(i int) error) error {
	var (
		next atomic.Int64
		mu   sync.Mutex
		errs []error
		wg   sync.WaitGroup
	)
	for range min(n, 16) {
		wg.Go(func() {
			for {
				i := int(next.Add(1) - 1)
				if i >= n {
					return
				}
				if err := f(i); err != nil {
					mu.Lock()
					errs = append(errs, err)
					mu.Unlock()
					return
				}
			}
		})
	}
	wg.Wait()
	if len(errs) > 0 {
		return errs[0]
	}
	return nil
}
