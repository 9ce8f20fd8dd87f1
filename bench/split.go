package bench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"regexp"
	"sync/atomic"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"

	"github.com/stockguard/stockguard"
)

// A run can be split over processes, as a service is deployed over
// machines: one process opens and stocks the store (Stock); each of the
// others attaches to it and runs a share of the workers over app instances
// of its own (Attach, Share.Run); the first merges what they send back
// (Part, as JSON) and audits the store once, over all of them
// (Stocked.Finish). A lock that holds only within one process fails there
// as it fails across servers.

// ErrInvalidShare is wrapped by the errors of Attach and Stocked.Finish
// when a share or the parts do not fit the run: a namespace Stock did not
// make, workers outside the workload's, parts that overlap or leave
// workers out.
var ErrInvalidShare = errors.New("bench: invalid share")

// Stocked is a fresh store, stocked for a workload whose workers run in
// other processes.
type Stocked struct {
	t     Target
	ns    string
	store *Store
	inv   stockguard.Inventory // for stocking and the audit
	r     *run
}

// Stock opens a fresh store of target t on servers s and stocks it for
// workload w, as Run does, for workers that run elsewhere (see Attach).
// Close removes it. A store's own work (Store.Consume) is handed off: the
// caller runs it (see Consumes).
//
// It returns an error wrapping ErrInvalidWorkload or ErrMissingBackend
// before doing anything (a Checkout cannot be split: its audit follows each
// order from the worker that placed it), one wrapping ErrSkipped when t
// cannot run split (it has no Attach) or cannot run w, or the error of
// setting up the store.
func Stock(ctx context.Context, t Target, s Servers, w Workload) (*Stocked, error) {
	if err := w.Validate(); err != nil {
		return nil, err
	}
	if w.Shape == Checkout {
		return nil, fmt.Errorf("%w: a checkout cannot be split over processes (its audit follows each order from the worker that placed it)", ErrInvalidWorkload)
	}
	if err := t.check(s); err != nil {
		return nil, err
	}
	switch {
	case t.OrdersOnly:
		return nil, fmt.Errorf("bench: %w: %s breaks only whole orders (run it with the checkout workload)", ErrSkipped, t.Name)
	case t.Attach == nil:
		return nil, fmt.Errorf("bench: %w: %s keeps its stock inside one process, so it cannot run split over processes", ErrSkipped, t.Name)
	}
	st := &Stocked{t: t, ns: newNamespace(), r: newRun(w)}
	var err error
	if st.store, err = t.Open(ctx, s, st.ns); err != nil {
		return nil, fmt.Errorf("bench: %s: open: %w", t.Name, err)
	}
	if st.store.Handoff != nil {
		if err := st.store.Handoff(ctx); err != nil {
			st.Close(ctx)
			return nil, fmt.Errorf("bench: %s: handing off its own work: %w", t.Name, err)
		}
	}
	if st.inv, err = st.store.New(); err != nil {
		err = fmt.Errorf("bench: %s: instance: %w", t.Name, err)
	} else if err = st.r.stock(ctx, st.inv); err != nil {
		err = fmt.Errorf("bench: %s: stocking: %w", t.Name, err)
	}
	if err != nil {
		st.Close(ctx)
		return nil, err
	}
	return st, nil
}

// Namespace is the store's namespace, for Attach.
func (st *Stocked) Namespace() string { return st.ns }

// Finish merges the parts, which must cover the workload's workers once
// each, into one Result — latencies from the workers' histograms, counts
// added up, the measured window from the earliest part's start to the
// latest request's end — and audits the store over all of them at once.
// It returns an error wrapping ErrInvalidShare when the parts do not fit
// the run, or the audit's error; when a part was interrupted (or ctx has
// ended) the Result comes back with Interrupted set, audited, together
// with an error, as from Run. Finish may be called once.
func (st *Stocked) Finish(ctx context.Context, parts []*Part) (*Result, error) {
	r := st.r
	if err := r.checkParts(parts); err != nil {
		return nil, err
	}
	origin := parts[0].d.Base
	for _, p := range parts {
		if p.d.Base.Before(origin) {
			origin = p.d.Base
		}
	}
	if r.acked == nil {
		r.acked = make([]atomic.Int64, len(r.skus))
	}
	start := time.Duration(-1)
	var retries int64
	var clientCPU time.Duration
	interrupted := false
	for _, p := range parts {
		d := &p.d
		// Each part timed itself from its own origin: shift its times onto
		// the earliest, through the wall clock the processes share.
		shift := d.Base.Sub(origin)
		if s := d.Start + shift; start < 0 || s < start {
			start = s
		}
		for _, pw := range d.Workers {
			h, err := hdrhistogram.Decode([]byte(pw.Hist))
			if err != nil {
				return nil, fmt.Errorf("%w: worker %d's histogram: %v", ErrInvalidShare, pw.ID, err)
			}
			wk := &worker{hist: h, max: pw.Max, counts: pw.Counts, attempts: pw.Attempts, units: pw.Units, others: pw.Others}
			if pw.LastEnd > 0 {
				wk.lastEnd = pw.LastEnd + shift
			}
			if pw.LastSuccess > 0 {
				wk.lastSuccess = pw.LastSuccess + shift
			}
			r.workers = append(r.workers, wk)
		}
		for i := range r.skus {
			r.acked[i].Add(d.Acked[i])
			r.unknown[i].Add(d.Unknown[i])
			if q := d.MinRefused[i]; q > 0 {
				r.refused(i, q) // and a sale SKU sold out when q is the least a request takes
			}
		}
		retries += d.Retries
		clientCPU += d.ClientCPU
		interrupted = interrupted || d.Interrupted
	}
	res := r.collect(start)
	res.ClientCPU = clientCPU
	res.Workload, res.Procs = r.w, len(parts)
	res.Retries = retries
	if res.Attempts > 0 {
		res.RetriesPerOp = float64(retries) / float64(res.Attempts)
	}
	res.Interrupted = interrupted || ctx.Err() != nil
	res, err := r.conclude(ctx, st.t, res, st.inv, st.store.Raw)
	withStats(res, st.store)
	return res, err
}

// checkParts reports parts that do not cover r's workers exactly once or
// do not have r's SKUs.
func (r *run) checkParts(parts []*Part) error {
	seen := make([]bool, r.w.Workers)
	for _, p := range parts {
		d := &p.d
		if len(d.Acked) != len(r.skus) || len(d.Unknown) != len(r.skus) || len(d.MinRefused) != len(r.skus) {
			return fmt.Errorf("%w: a part has %d SKUs, the run %d", ErrInvalidShare, len(d.Acked), len(r.skus))
		}
		for _, pw := range d.Workers {
			if pw.ID < 0 || pw.ID >= len(seen) || seen[pw.ID] {
				return fmt.Errorf("%w: worker %d of %d is out of range or reported twice", ErrInvalidShare, pw.ID, len(seen))
			}
			seen[pw.ID] = true
		}
	}
	for id, ok := range seen {
		if !ok {
			return fmt.Errorf("%w: no part reports worker %d", ErrInvalidShare, id)
		}
	}
	return nil
}

// Close removes the store and closes the instance Stock built.
func (st *Stocked) Close(ctx context.Context) error {
	var errs []error
	if c, ok := st.inv.(io.Closer); ok {
		errs = append(errs, c.Close())
	}
	if st.store.Close != nil {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
		defer cancel()
		errs = append(errs, st.store.Close(cctx))
	}
	return errors.Join(errs...)
}

// Share is one process's share of a split run: some of the workload's
// workers, over app instances of its own, on the store another process
// opened and stocked.
type Share struct {
	insts []stockguard.Inventory
	r     *run
}

// namespaceRE matches the namespaces newNamespace makes: nothing else may
// reach a table name or a key prefix.
var namespaceRE = regexp.MustCompile(`^sb[0-9a-f]{12}$`)

// Attach reaches the store that Stock opened in namespace ns, from another
// process, on servers s opened there, and builds the app instances of
// workers first…first+count-1 of w's: min(w.Instances, count) of them,
// worker i on instance i mod that. Close closes them.
//
// It returns an error wrapping ErrInvalidWorkload, ErrInvalidShare (a
// namespace Stock did not make, or workers outside w's) or
// ErrMissingBackend before doing anything, one wrapping ErrSkipped when t
// has no Attach, or the error of reaching the store.
func Attach(ctx context.Context, t Target, s Servers, w Workload, ns string, first, count int) (*Share, error) {
	if err := w.Validate(); err != nil {
		return nil, err
	}
	switch {
	case !namespaceRE.MatchString(ns):
		return nil, fmt.Errorf("%w: namespace %q is not one Stock made", ErrInvalidShare, ns)
	case first < 0 || count < 1 || first+count > w.Workers:
		return nil, fmt.Errorf("%w: workers %d…%d of %d", ErrInvalidShare, first, first+count-1, w.Workers)
	case w.Shape == Checkout:
		return nil, fmt.Errorf("%w: a checkout cannot be split over processes", ErrInvalidWorkload)
	}
	store, err := attach(ctx, t, s, ns)
	if err != nil {
		return nil, err
	}
	sh := &Share{r: newRun(w)}
	sh.r.first, sh.r.count = first, count
	for i := range min(w.Instances, count) {
		inv, err := store.New()
		if err != nil {
			sh.Close()
			return nil, fmt.Errorf("bench: %s: instance %d: %w", t.Name, i, err)
		}
		sh.insts = append(sh.insts, inv)
	}
	return sh, nil
}

// Run runs the share's workers through warm-up and the measured window, as
// Run does, and returns what they measured, for Stocked.Finish. When ctx
// ends the workers stop early and the Part says so. Run may be called once.
func (sh *Share) Run(ctx context.Context, opts ...Option) (*Part, error) {
	var o runOptions
	for _, opt := range opts {
		opt(&o)
	}
	r := sh.r
	res := r.execute(ctx, sh.insts, o)
	n := len(r.skus)
	p := &Part{d: partData{
		Base: r.base, Start: r.start, Retries: res.Retries, Interrupted: res.Interrupted, ClientCPU: res.ClientCPU,
		Acked: make([]int64, n), Unknown: make([]int64, n), MinRefused: make([]int64, n),
	}}
	for i := range n {
		p.d.Acked[i] = r.ackedUnits(i)
		p.d.Unknown[i] = r.unknown[i].Load()
		p.d.MinRefused[i] = r.minRefused[i].Load()
	}
	for i, wk := range r.workers {
		h, err := wk.hist.Encode(hdrhistogram.V2CompressedEncodingCookieBase)
		if err != nil {
			return nil, fmt.Errorf("bench: encoding worker %d's histogram: %w", r.first+i, err)
		}
		p.d.Workers = append(p.d.Workers, partWorker{
			ID: r.first + i, Hist: string(h), Max: wk.max, Counts: wk.counts,
			Attempts: wk.attempts, Units: wk.units, LastEnd: wk.lastEnd, LastSuccess: wk.lastSuccess, Others: wk.others,
		})
	}
	return p, nil
}

// Close closes the share's instances.
func (sh *Share) Close() error {
	var errs []error
	for _, inv := range sh.insts {
		if c, ok := inv.(io.Closer); ok {
			errs = append(errs, c.Close())
		}
	}
	return errors.Join(errs...)
}

// Part is what a Share measured: per worker, its latency histogram and its
// counts; per SKU, the units acknowledged and of unknown outcome and the
// smallest quantity refused (a sale SKU sold out when that is the least a
// request takes). It travels between processes as JSON.
type Part struct{ d partData }

// partData is a Part's content in its JSON form.
type partData struct {
	// Base is the part's clock origin, on the wall clock the processes of
	// one machine share; the durations below count from it.
	Base        time.Time     `json:"base"`
	Start       time.Duration `json:"start_ns"`
	Retries     int64         `json:"retries"`
	Interrupted bool          `json:"interrupted,omitempty"`
	ClientCPU   time.Duration `json:"client_cpu_ns,omitempty"` // the part's process over its window
	Workers     []partWorker  `json:"workers"`
	Acked       []int64       `json:"acked"`
	Unknown     []int64       `json:"unknown"`
	MinRefused  []int64       `json:"min_refused"`
}

// partWorker is one worker's figures; Hist is its histogram in
// HdrHistogram's compressed V2 encoding.
type partWorker struct {
	ID          int                `json:"id"`
	Hist        string             `json:"hist"`
	Max         int64              `json:"max_ns"`
	Counts      [2][numKinds]int64 `json:"counts"`
	Attempts    int64              `json:"attempts"`
	Units       int64              `json:"units"`
	LastEnd     time.Duration      `json:"last_end_ns"`
	LastSuccess time.Duration      `json:"last_success_ns"`
	Others      []string           `json:"others,omitempty"`
}

// MarshalJSON encodes p.
func (p *Part) MarshalJSON() ([]byte, error) { return json.Marshal(p.d) }

// UnmarshalJSON decodes what MarshalJSON encoded.
func (p *Part) UnmarshalJSON(b []byte) error { return json.Unmarshal(b, &p.d) }

// attach reaches the store Stock opened in namespace ns through t's
// Attach, on servers s: an error wrapping ErrMissingBackend or ErrSkipped
// (t keeps its stock in one process) before doing anything, or the
// Attach's.
func attach(ctx context.Context, t Target, s Servers, ns string) (*Store, error) {
	if err := t.check(s); err != nil {
		return nil, err
	}
	if t.Attach == nil {
		return nil, fmt.Errorf("bench: %w: %s keeps its stock inside one process, so it cannot run split over processes", ErrSkipped, t.Name)
	}
	store, err := t.Attach(ctx, s, ns)
	if err != nil {
		return nil, fmt.Errorf("bench: %s: attach: %w", t.Name, err)
	}
	return store, nil
}
