package faults

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"math"
	"runtime"
	"runtime/pprof"
	"slices"
	"sync"
	"time"

	"github.com/stockguard/stockguard"
	"github.com/stockguard/stockguard/bench"
	"github.com/stockguard/stockguard/internal/backends"
)

// okSample bounds the acknowledged orders checked through Order.
const okSample = 200

// reconcile learns the outcome of every order that ended ErrOutcomeUnknown
// through Order — held or taken: applied, with exactly its lines;
// ErrUnknownOrder: not applied — and checks a sample of acknowledged
// orders the same way.
func (r *runner) reconcile(ctx context.Context) {
	if !r.orders {
		return
	}
	ord := r.insts[0].(stockguard.Orders)
	var unknown, ok []op
	for _, h := range r.history {
		for _, o := range h {
			switch {
			case !o.order:
			case o.kind == bench.KindOutcomeUnknown:
				unknown = append(unknown, o)
			case o.kind == bench.KindOK:
				ok = append(ok, o)
			}
		}
	}
	if len(ok) > okSample && !r.everyOrder {
		step := len(ok) / okSample
		sample := ok[:0]
		for i := 0; i < len(ok); i += step {
			sample = append(sample, ok[i])
		}
		ok = sample
	}
	r.applied = map[[2]int32]bool{}
	var mu sync.Mutex
	check := func(o op, acked bool) {
		info, err := retry(ctx, func(ctx context.Context) (stockguard.OrderInfo, error) {
			return ord.Order(ctx, orderID(o.buyer, o.seq))
		})
		mu.Lock()
		defer mu.Unlock()
		applied := false
		switch {
		case err == nil && (info.State == stockguard.OrderTaken || info.State == stockguard.OrderHeld):
			applied = true
			if extra := excess(info.Lines, o.qty); extra != 0 {
				r.rep.Duplicated += max(extra, 0)
				r.rep.problem("order %s holds lines %v, asked %v", info.ID, info.Lines, o.qty)
			}
		case err == nil:
			r.rep.problem("order %s is %v after a single Take", info.ID, info.State)
		case errors.Is(err, stockguard.ErrUnknownOrder):
		default:
			r.rep.problem("Order(%s): %v", orderID(o.buyer, o.seq), err)
			return
		}
		if acked {
			if !applied {
				r.rep.Forgotten++
				r.rep.problem("order %s was acknowledged, but Order says it was not applied", orderID(o.buyer, o.seq))
			}
			return
		}
		r.rep.Reconciled++
		if applied {
			r.rep.ReconciledApplied++
			r.applied[[2]int32{o.buyer, o.seq}] = true
		}
	}
	r.rep.UnknownOrders = int64(len(unknown))
	parallel(len(unknown), func(i int) { check(unknown[i], false) })
	parallel(len(ok), func(i int) { check(ok[i], true) })
}

// ledger checks a target of two tiers: once its queue drained and its
// tiers agree (ledger's own check, tiered's reconciler), the store of record
// holds every order the run acknowledged or reconcile found applied, each
// with exactly its lines (taken once: the audit's raw reading of the record
// has checked the units), and none of those reconcile found not applied.
func (r *runner) ledger(ctx context.Context, ledger func(context.Context, ...string) (stockguard.Orders, error)) {
	record, err := ledger(ctx, skus[:]...)
	if err != nil {
		r.rep.problem("the tiers after the run: %v", err)
		return
	}
	type want struct {
		o       op
		applied bool
	}
	var orders []want
	for _, h := range r.history {
		for _, o := range h {
			switch {
			case !o.order:
			case o.kind == bench.KindOK:
				orders = append(orders, want{o, true})
			case o.kind == bench.KindOutcomeUnknown:
				orders = append(orders, want{o, r.applied[[2]int32{o.buyer, o.seq}]})
			}
		}
	}
	var mu sync.Mutex
	parallel(len(orders), func(i int) {
		w := orders[i]
		id := orderID(w.o.buyer, w.o.seq)
		info, err := retry(ctx, func(ctx context.Context) (stockguard.OrderInfo, error) { return record.Order(ctx, id) })
		mu.Lock()
		defer mu.Unlock()
		r.rep.Recorded++
		switch {
		case err == nil && info.State == stockguard.OrderTaken && w.applied:
			if extra := excess(info.Lines, w.o.qty); extra != 0 {
				r.rep.Duplicated += max(extra, 0)
				r.rep.problem("order %s holds lines %v in the store of record, asked %v", id, info.Lines, w.o.qty)
			}
		case err == nil:
			r.rep.problem("order %s is %v in the store of record, applied on the front: %v", id, info.State, w.applied)
		case errors.Is(err, stockguard.ErrUnknownOrder) && w.applied:
			r.rep.Forgotten++
			r.rep.problem("order %s was applied on the front, but the store of record does not have it", id)
		case errors.Is(err, stockguard.ErrUnknownOrder):
		default:
			r.rep.problem("Order(%s) of the store of record: %v", id, err)
		}
	})
}

// excess returns the units lines hold beyond qty (negative: fewer).
func excess(lines []stockguard.Line, qty [2]int64) int64 {
	var n int64
	for _, l := range lines {
		i := slices.Index(skus[:], l.SKU)
		if i < 0 {
			n += l.Qty
			continue
		}
		n += l.Qty - qty[i]
	}
	for i, q := range qty {
		if q > 0 && !slices.ContainsFunc(lines, func(l stockguard.Line) bool { return l.SKU == skus[i] }) {
			n -= q
		}
	}
	return n
}

// audit checks, SKU by SKU, that the stock gone — read through Stock and
// straight from the backend — is what buyers were told: exactly the units
// acknowledged plus those of reconciled orders found applied, and at most
// the units of unknown Decrements more.
func (r *runner) audit(ctx context.Context, raw func(context.Context, string) (int64, error)) {
	rep := r.rep
	var acked, unknown, refused [2]int64 // refused: smallest qty refused as insufficient
	var down int64                       // calls that said "busy" while the server was down
	var unexpected = map[bench.Kind]int64{}
	downAt, backAt := time.Duration(r.sc.down.Load()), time.Duration(r.sc.back.Load())
	settled := time.Duration(r.sc.settled.Load())
	for _, h := range r.history {
		for _, o := range h {
			rep.Ops++
			rep.Kinds[o.kind.String()]++
			switch o.kind {
			case bench.KindOK:
				acked[0] += o.qty[0]
				acked[1] += o.qty[1]
			case bench.KindOutcomeUnknown:
				rep.Unknown++
				if r.applied[[2]int32{o.buyer, o.seq}] {
					acked[0] += o.qty[0]
					acked[1] += o.qty[1]
				} else if !o.order {
					unknown[0] += o.qty[0]
					unknown[1] += o.qty[1]
					rep.UnknownUnits += o.qty[0] + o.qty[1]
				}
			case bench.KindInsufficient:
				// A two-line order refused says only that one of its SKUs
				// was short; a master since replaced may have counted
				// takes its successor never had.
				if o.qty[0] > 0 && o.qty[1] > 0 || o.start < settled {
					break
				}
				for i, q := range o.qty {
					if q > 0 && (refused[i] == 0 || q < refused[i]) {
						refused[i] = q
					}
				}
			case bench.KindContention:
				if backAt > 0 && o.start >= downAt+downGrace && o.end <= backAt {
					down++
				}
			case bench.KindUnavailable, bench.KindCanceled, bench.KindOther:
			default:
				unexpected[o.kind]++
			}
		}
	}
	if down > 0 {
		rep.problem("%d calls reported ErrContention while the server was down (want ErrUnavailable)", down)
	}
	for k, n := range unexpected {
		rep.problem("%d calls ended %s, which this workload never calls for", n, k)
	}
	if m := r.minRaw.Load(); m < 0 {
		rep.problem("the backend held %d units of %s during the run: below zero", m, scarceSKU)
	}
	for i, sku := range skus {
		initial := [2]int64{hotStock, scarceStock}[i]
		final, err := retry(ctx, func(ctx context.Context) (int64, error) { return r.insts[0].Stock(ctx, sku) })
		if err != nil {
			rep.problem("Stock(%s) after the run: %v", sku, err)
			continue
		}
		readings := []int64{final}
		if raw != nil {
			v, err := retry(ctx, func(ctx context.Context) (int64, error) { return raw(ctx, sku) })
			if err != nil {
				rep.problem("reading %s from the backend after the run: %v", sku, err)
				continue
			}
			if v != final {
				rep.problem("%s: Stock says %d, the backend holds %d", sku, final, v)
			}
			readings = append(readings, v)
		}
		var over, lost int64
		for _, f := range readings {
			gone := initial - f
			if f < 0 {
				rep.problem("%s ended at %d: below zero", sku, f)
			}
			over = max(over, acked[i]-gone)
			lost = max(lost, gone-acked[i]-unknown[i])
			if refused[i] > 0 && f >= refused[i] {
				rep.problem("%s: a request of %d was refused as insufficient, yet %d remained", sku, refused[i], f)
			}
		}
		rep.Initial += initial
		rep.Acked += acked[i]
		rep.Gone += initial - readings[len(readings)-1]
		rep.Oversold += over
		rep.Lost += lost
		if over > 0 || lost > 0 {
			rep.problem("%s: stocked %d, acknowledged %d (reconciled orders included), %d units of unknown Decrements, final %v: oversold %d, lost %d",
				sku, initial, acked[i], unknown[i], readings, over, lost)
		}
	}
	r.throughput()
}

// downGrace is how long after a kill calls may still see the old server.
const downGrace = 50 * time.Millisecond

// bucket is the resolution of the throughput figures.
const bucket = 100 * time.Millisecond

// throughput fills in Baseline, Dip, Outage and Recovery from the calls
// answered (acknowledged or refused as insufficient) per 100 ms.
func (r *runner) throughput() {
	rep := r.rep
	rep.Recovery = -1
	n := int(rep.Elapsed/bucket) + 1
	answered := make([]float64, n)
	for _, h := range r.history {
		for _, o := range h {
			if o.kind == bench.KindOK || o.kind == bench.KindInsufficient {
				answered[int(o.end/bucket)]++
			}
		}
	}
	for i := range answered {
		answered[i] /= bucket.Seconds()
	}
	first, start := 1, int(rep.FaultStart/bucket) // the first bucket warms the pools
	if start > first {
		var sum float64
		for _, v := range answered[first:start] {
			sum += v
		}
		rep.Baseline = sum / float64(start-first)
	}
	if rep.Baseline == 0 {
		return
	}
	from, after := rep.FaultEnd, bucket // recovery counts from the bucket holding from
	if origin := time.Duration(r.sc.origin.Load()); origin > 0 {
		// A failover: from the master's loss, in the buckets after it —
		// the one holding it counts calls the old master answered.
		from, after = origin, 0
	} else if back := time.Duration(r.sc.back.Load()); back > 0 {
		from = back // a restart: from the moment the server was started again
	}
	last := n - 1 // the last bucket is cut short by the end of the run
	rep.Dip = math.Inf(1)
	run := 0
	for i := start; i < last; i++ {
		v := answered[i]
		if time.Duration(i)*bucket <= rep.FaultEnd {
			rep.Dip = min(rep.Dip, v/rep.Baseline)
		}
		if v == 0 {
			run++
			rep.Outage = max(rep.Outage, time.Duration(run)*bucket)
		} else {
			run = 0
		}
		if rep.Recovery < 0 && time.Duration(i)*bucket+after > from && v >= rep.Baseline/2 {
			rep.Recovery = max(time.Duration(i)*bucket-from, 0)
		}
	}
	if math.IsInf(rep.Dip, 1) {
		rep.Dip = 0
	}
	// A fault that cost nothing is a dip to 100%: a bucket above the
	// baseline during it is noise (or a fault that makes calls cheaper,
	// such as a deadline), not a gain.
	rep.Dip = min(rep.Dip, 1)
}

// leakWait is how long goroutines and connections get to end after Close:
// a mysqllock request abandoned by its caller may run on for its grace
// period of a second, and a loaded machine (-race, other test binaries)
// stretches that.
const leakWait = 8 * time.Second

// checkLeaks waits for the goroutines and the proxied connections the run
// started to end, and records those that do not.
func (r *runner) checkLeaks(before int, proxy *Proxy) {
	deadline := time.Now().Add(leakWait)
	for (countGoroutines() > before || proxy.Open() > 0) && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	if n := proxy.Open(); n > 0 {
		r.rep.problem("%d connections still open through the proxy after Close", n)
	}
	if n := countGoroutines(); n > before {
		r.rep.problem("%d goroutines after Close, %d before the run", n, before)
		var b bytes.Buffer
		pprof.Lookup("goroutine").WriteTo(&b, 1)
		r.rep.Goroutines = b.String()
	}
}

// countGoroutines counts the process's goroutines but the deployments'
// Links' (see backends.Forwarding).
func countGoroutines() int { return runtime.NumGoroutine() - backends.Forwarding() }

// parallel calls f(0…n-1) from 8 goroutines.
func parallel(n int, f func(i int)) {
	var wg sync.WaitGroup
	next := make(chan int)
	for range min(n, 8) {
		wg.Go(func() {
			for i := range next {
				f(i)
			}
		})
	}
	for i := range n {
		next <- i
	}
	close(next)
	wg.Wait()
}

// newNamespace returns a fresh store namespace, as bench names its own.
func newNamespace() string {
	var b [6]byte
	rand.Read(b[:])
	return "fl" + hex.EncodeToString(b[:])
}
