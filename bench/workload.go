package bench

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/stockguard/stockguard"
)

// Shape is the form of a workload over time.
type Shape int

const (
	// Steady keeps every SKU stocked far beyond what the run can sell, so it
	// measures sustained throughput.
	Steady Shape = iota
	// Flash stocks each SKU with far fewer units than the buyers want: it
	// measures the time to sell out and how refusals behave afterwards.
	Flash
	// Checkout runs whole orders through stockguard.Orders: carts of
	// several lines, taken or held, confirmed, returned or left to expire,
	// with restocks as it goes. It runs only on targets whose instances
	// implement Orders.
	Checkout
)

// String returns "steady" or "flash".
func (s Shape) String() string {
	switch s {
	case Steady:
		return "steady"
	case Flash:
		return "flash"
	case Checkout:
		return "checkout"
	}
	return "Shape(" + strconv.Itoa(int(s)) + ")"
}

// ParseShape parses "steady" or "flash".
func ParseShape(s string) (Shape, error) {
	switch strings.ToLower(s) {
	case "steady":
		return Steady, nil
	case "flash", "flash-sale", "flashsale":
		return Flash, nil
	case "checkout":
		return Checkout, nil
	}
	return 0, fmt.Errorf("bench: workload %q: want steady or flash (or checkout)", s)
}

// Skew says how requests spread over SKUs.
type Skew struct {
	// Zipf, when above 1, draws SKU k (0-based) with probability
	// proportional to 1/(1+k)^Zipf, so SKU 0 is the hottest; 0 means uniform.
	Zipf float64
}

// Uniform spreads requests evenly over the SKUs.
var Uniform = Skew{}

// DefaultZipf is the exponent ParseSkew uses for a bare "zipf".
const DefaultZipf = 1.1

// String returns "uniform" or "zipf:S".
func (s Skew) String() string {
	if s.Zipf == 0 {
		return "uniform"
	}
	return "zipf:" + strconv.FormatFloat(s.Zipf, 'g', -1, 64)
}

// ParseSkew parses "uniform", "zipf" (exponent DefaultZipf) or "zipf:S"
// with S > 1.
func ParseSkew(s string) (Skew, error) {
	name, arg, hasArg := strings.Cut(strings.ToLower(s), ":")
	switch {
	case name == "uniform" && !hasArg:
		return Uniform, nil
	case name == "zipf" && !hasArg:
		return Skew{Zipf: DefaultZipf}, nil
	case name == "zipf":
		z, err := strconv.ParseFloat(arg, 64)
		if err != nil || !(z > 1) || math.IsInf(z, 0) {
			return Skew{}, fmt.Errorf("bench: skew %q: the zipf exponent must be a number above 1", s)
		}
		return Skew{Zipf: z}, nil
	}
	return Skew{}, fmt.Errorf("bench: skew %q: want uniform, zipf or zipf:S (S > 1)", s)
}

// Workload describes what the buyers do. The zero value is not valid; start
// from DefaultWorkload.
type Workload struct {
	Shape Shape
	// SKUs is the number of distinct SKUs, 1…MaxSKUs.
	SKUs int
	Skew Skew
	// Stock is each SKU's initial stock; 0 picks the shape's default
	// (DefaultSteadyStock or DefaultFlashStock).
	Stock int64
	// QtyMin and QtyMax bound each request's quantity, drawn uniformly;
	// equal for a fixed quantity.
	QtyMin, QtyMax int64
	// Workers is the number of concurrent buyers, 1…MaxWorkers.
	Workers int
	// Instances is the number of app instances the workers are spread over
	// (worker i uses instance i mod Instances), each built by its own call
	// of the target's constructor, as separate processes would be.
	Instances int
	// Duration bounds the measured part of the run. With Ops > 0 it is an
	// upper bound (0: none); otherwise it is required.
	Duration time.Duration
	// Ops, when above 0, ends the run after that many measured attempts.
	Ops int64
	// Warmup runs before measuring and is excluded from every figure but
	// the audit. A flash sale warms up on separate SKUs so that the sale
	// starts with full stock.
	Warmup time.Duration
	// Rate, when above 0, makes the load open-loop: requests arrive on a
	// fixed schedule of Rate per second in total, spread evenly over the
	// workers, whether earlier ones have returned or not, and each latency
	// runs from the request's intended start (see schedule). 0 is
	// closed-loop: each worker sends its next request as soon as the
	// previous one returns.
	Rate float64
	// Drain, in a Steady workload, makes each worker's first Drain requests
	// ask for 1, 2, 3, 1, … units of one more SKU stocked with Drain units
	// per worker: fewer than they ask for in all, so that every run sells
	// a SKU out under contention and asks for more than one unit at a time
	// (the stock check and multi-unit requests are exercised whatever the
	// main SKUs' stock and qty). They count as ordinary requests. 0: none.
	Drain int
	// Orders shapes a Checkout workload; other shapes ignore it.
	Orders OrderMix
	// Seed makes each worker's sequence of SKUs and quantities
	// reproducible (the interleaving of workers is not).
	Seed uint64
}

// Limits and defaults of a Workload.
const (
	MaxSKUs            = 1_000_000
	MaxWorkers         = 1024
	MaxRate            = 10_000_000        // requests per second, open-loop; the harness's own ceiling
	DefaultSteadyStock = 1_000_000_000_000 // a run of any length sells a tiny fraction of it
	DefaultFlashStock  = 5_000
	DefaultDrain       = 4
	MaxDrain           = 1000
)

// OrderMix says what the orders of a Checkout workload look like. Each
// operation is a restock (RestockShare) or an order of 1…Lines distinct
// SKUs drawn by the workload's skew, each line of the workload's quantity.
// An order is a hold (HoldShare) — a third of holds confirmed, a third
// returned, the rest left to expire after HoldTTL — or a take, returned
// afterwards with probability ReturnShare. ShortShare of the carts of two
// lines or more end with a line of a SKU that has no stock, which must
// refuse the whole cart.
type OrderMix struct {
	Lines                                            int
	HoldShare, ReturnShare, RestockShare, ShortShare float64
	HoldTTL                                          time.Duration
}

// Defaults of an OrderMix.
const (
	DefaultLines        = 3
	DefaultHoldShare    = 0.3
	DefaultHoldTTL      = 200 * time.Millisecond
	DefaultReturnShare  = 0.1
	DefaultRestockShare = 0.01
	DefaultShortShare   = 0.02
)

// DefaultOrderMix returns the defaults above.
func DefaultOrderMix() OrderMix {
	return OrderMix{
		Lines: DefaultLines, HoldShare: DefaultHoldShare, HoldTTL: DefaultHoldTTL,
		ReturnShare: DefaultReturnShare, RestockShare: DefaultRestockShare, ShortShare: DefaultShortShare,
	}
}

// DefaultWorkload is the contention workload: one hot SKU, steady, one unit
// per request after DefaultDrain requests per worker that sell a SKU out, 8
// workers over 2 instances, 2 s measured after 500 ms of warm-up.
func DefaultWorkload() Workload {
	return Workload{
		Shape: Steady, SKUs: 1, Skew: Uniform,
		QtyMin: 1, QtyMax: 1,
		Workers: 8, Instances: 2,
		Duration: 2 * time.Second, Warmup: 500 * time.Millisecond,
		Drain:  DefaultDrain,
		Orders: DefaultOrderMix(),
		Seed:   1,
	}
}

// ErrInvalidWorkload is wrapped by Workload.Validate's errors.
var ErrInvalidWorkload = errors.New("bench: invalid workload")

// drains reports whether the workload has a drain SKU (see Drain).
func (w Workload) drains() bool { return w.Shape == Steady && w.Drain > 0 }

// drainStock is the drain SKU's initial stock: Drain units per worker that
// runs, while each worker asks for about twice that.
func (w Workload) drainStock() int64 {
	active := int64(w.Workers)
	if w.Ops > 0 {
		active = min(active, w.Ops)
	}
	return int64(w.Drain) * active
}

// drainQty is the quantity of a worker's j-th drain request.
func drainQty(j int) int64 { return 1 + int64(j%3) }

// InitialStock returns the stock each SKU starts with.
func (w Workload) InitialStock() int64 {
	switch {
	case w.Stock > 0:
		return w.Stock
	case w.Shape == Flash:
		return DefaultFlashStock
	}
	return DefaultSteadyStock
}

// Validate reports the first problem of w, wrapping ErrInvalidWorkload.
func (w Workload) Validate() error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: "+format, append([]any{ErrInvalidWorkload}, args...)...)
	}
	switch {
	case w.Shape != Steady && w.Shape != Flash && w.Shape != Checkout:
		return bad("unknown shape %v", w.Shape)
	case w.SKUs < 1 || w.SKUs > MaxSKUs:
		return bad("%d SKUs, want 1…%d", w.SKUs, MaxSKUs)
	case w.Skew.Zipf != 0 && !(w.Skew.Zipf > 1):
		return bad("zipf exponent %g, want above 1", w.Skew.Zipf)
	case w.Stock < 0 || w.Stock > stockguard.MaxQty:
		return bad("stock %d, want 0…%d", w.Stock, int64(stockguard.MaxQty))
	case w.InitialStock() > (1<<62)/int64(2*w.SKUs):
		return bad("stock %d × %d SKUs is too large to audit exactly", w.InitialStock(), w.SKUs)
	case w.QtyMin < 1 || w.QtyMax < w.QtyMin || w.QtyMax > stockguard.MaxQty:
		return bad("qty %d…%d, want 1 ≤ min ≤ max ≤ %d", w.QtyMin, w.QtyMax, int64(stockguard.MaxQty))
	case w.Workers < 1 || w.Workers > MaxWorkers:
		return bad("%d workers, want 1…%d", w.Workers, MaxWorkers)
	case w.Instances < 1:
		return bad("%d instances, want at least 1", w.Instances)
	case w.Drain < 0 || w.Drain > MaxDrain:
		return bad("drain %d requests per worker, want 0…%d", w.Drain, MaxDrain)
	case w.Duration < 0 || w.Ops < 0 || w.Warmup < 0:
		return bad("negative duration, op count or warm-up")
	case w.Rate < 0 || w.Rate > MaxRate || w.Rate != w.Rate:
		return bad("rate %g/s, want 0 (closed-loop) or up to %d", w.Rate, MaxRate)
	case w.Rate > 0 && w.Shape == Checkout:
		return bad("open-loop checkout: -rate schedules decrements only")
	case w.Duration == 0 && w.Ops == 0:
		return bad("neither a duration nor an op count")
	}
	if w.Shape == Checkout {
		return w.Orders.validate(bad)
	}
	return nil
}

func (m OrderMix) validate(bad func(string, ...any) error) error {
	share := func(v float64) bool { return v >= 0 && v <= 1 }
	switch {
	case m.Lines < 1 || m.Lines > stockguard.MaxLines:
		return bad("%d lines per order, want 1…%d", m.Lines, stockguard.MaxLines)
	case !share(m.HoldShare) || !share(m.ReturnShare) || !share(m.RestockShare) || !share(m.ShortShare):
		return bad("order shares must be in 0…1")
	case m.HoldShare > 0 && (m.HoldTTL < stockguard.MinHoldTTL || m.HoldTTL > stockguard.MaxHoldTTL):
		return bad("hold ttl %v, want %v…%v", m.HoldTTL, stockguard.MinHoldTTL, stockguard.MaxHoldTTL)
	}
	return nil
}

// LinesText says how many lines a checkout's orders have: "1–3 lines", or
// "1 line" when there are not SKUs enough for more (an order's lines are
// distinct SKUs).
func (w Workload) LinesText() string {
	n := min(w.Orders.Lines, w.SKUs)
	if n <= 1 {
		return "1 line"
	}
	return fmt.Sprintf("1–%d lines", n)
}

// Qty returns the request quantity as text: "1" or "1-3".
func (w Workload) Qty() string {
	if w.QtyMin == w.QtyMax {
		return strconv.FormatInt(w.QtyMin, 10)
	}
	return strconv.FormatInt(w.QtyMin, 10) + "-" + strconv.FormatInt(w.QtyMax, 10)
}

// ParseQty parses "N" or "MIN-MAX".
func ParseQty(s string) (lo, hi int64, err error) {
	a, b, isRange := strings.Cut(s, "-")
	lo, err = strconv.ParseInt(strings.TrimSpace(a), 10, 64)
	if err == nil {
		hi = lo
		if isRange {
			hi, err = strconv.ParseInt(strings.TrimSpace(b), 10, 64)
		}
	}
	if err != nil || lo < 1 || hi < lo || hi > stockguard.MaxQty {
		return 0, 0, fmt.Errorf("bench: qty %q: want N or MIN-MAX with 1 ≤ MIN ≤ MAX", s)
	}
	return lo, hi, nil
}
