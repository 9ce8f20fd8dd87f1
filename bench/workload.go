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
)

// String returns "steady" or "flash".
func (s Shape) String() string {
	switch s {
	case Steady:
		return "steady"
	case Flash:
		return "flash"
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
	}
	return 0, fmt.Errorf("bench: workload %q: want steady or flash", s)
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
	// Seed makes each worker's sequence of SKUs and quantities
	// reproducible (the interleaving of workers is not).
	Seed uint64
}

// Limits and defaults of a Workload.
const (
	MaxSKUs            = 1_000_000
	MaxWorkers         = 1024
	DefaultSteadyStock = 1_000_000_000_000 // a run of any length sells a tiny fraction of it
	DefaultFlashStock  = 5_000
)

// DefaultWorkload is the contention workload: one hot SKU, steady, one unit
// per request, 8 workers over 2 instances, 2 s measured after 500 ms of
// warm-up.
func DefaultWorkload() Workload {
	return Workload{
		Shape: Steady, SKUs: 1, Skew: Uniform,
		QtyMin: 1, QtyMax: 1,
		Workers: 8, Instances: 2,
		Duration: 2 * time.Second, Warmup: 500 * time.Millisecond,
		Seed: 1,
	}
}

// ErrInvalidWorkload is wrapped by Workload.Validate's errors.
var ErrInvalidWorkload = errors.New("bench: invalid workload")

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
	case w.Shape != Steady && w.Shape != Flash:
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
	case w.Duration < 0 || w.Ops < 0 || w.Warmup < 0:
		return bad("negative duration, op count or warm-up")
	case w.Duration == 0 && w.Ops == 0:
		return bad("neither a duration nor an op count")
	}
	return nil
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
