package stocktest

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	mrand "math/rand/v2"
	"os"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stockguard/stockguard"
	"github.com/stockguard/stockguard/strategy"
)

// Environment variables that steer an Adversary run from outside a test.
const (
	// EnvAdversarySeed fixes the seed of every Adversary run whose Seed is
	// zero, to repeat a failed run's workload.
	EnvAdversarySeed = "STOCKGUARD_ADVERSARY_SEED"
	// EnvAdversary, set to "long", makes every Adversary run whose
	// Duration is zero last DefaultAdversaryLong; set to a Go duration
	// ("5m"), that long.
	EnvAdversary = "STOCKGUARD_ADVERSARY"
)

// Default lengths of an Adversary run.
const (
	DefaultAdversaryShort = 3 * time.Second
	DefaultAdversaryLong  = 2 * time.Minute
)

// Adversary runs a seeded random workload of callers that give up and
// repeat against several instances of one store, and checks every answer
// against a model of what the store must hold.
//
// A share of the calls runs under a deadline between a microsecond and
// tens of milliseconds; a call that ends without a definite answer
// (ErrOutcomeUnknown, ErrContention, ErrUnavailable, the context's error)
// is repeated with the same arguments on a randomly chosen instance until
// one comes, except that a share of callers stop at an answer that says
// nothing changed, and their IDs must then be recorded nowhere. Every
// operation is interleaved: Take and Hold of carts in any line order, up
// to MaxLines long, some with a SKU never stocked; holds with TTLs short
// enough to expire during the run; Confirm, Return, Restock; repeats with
// the same cart, with another (a line dropped, added, swapped or changed,
// the other kind), and two live calls with one ID; the other kind of call
// under an order's or a restock's ID; Order; Stock (also of a SKU never
// stocked); SetStock, also on SKUs orders use. Every answer is checked
// against a model: the client's clock (every attempt's send and return
// times) says when a hold is surely held and surely expired, give or take
// Tolerance, and each worker's own SKUs, which only it orders, have levels
// the model knows, so a refusal with the units on the shelf is caught. At
// the end of every round, with no call running, every ID's Order and
// every SKU's Stock are compared with the model: a refused order is never
// recorded, an acknowledged one is recorded once with its lines and a
// state its history and the clock allow, and per SKU initial + restocked
// == Stock + units in held and taken orders. After the last round the
// run waits Late and checks again.
//
// The seed fixes every choice of the workload (the calls, their
// arguments, deadlines and instances), not the timing; a failure names
// the seed and how to run it again.
type Adversary struct {
	// Seed of the workload. Zero: EnvAdversarySeed if set, else random.
	Seed uint64
	// Duration of the run. Zero: DefaultAdversaryShort, or as EnvAdversary
	// says.
	Duration time.Duration
	// Rounds the run is cut into; every round ends with a quiet check.
	// Default 2.
	Rounds int
	// Workers calling concurrently. Default 8.
	Workers int
	// Quiet, when set, runs before every quiet check of an Orders run,
	// with no call running, given every SKU the run uses: for a store
	// whose reads need something to finish first (a queue drained), and
	// for checks of the store's own (its tiers agree). An error is a
	// violation.
	Quiet func(ctx context.Context, skus []string) error
	// Late is the longest the run's network may hold a request past its
	// caller's deadline before delivering it (a proxy's buffer, a
	// retransmission). After the workers stop, the checker waits this
	// long, so that every abandoned attempt has landed, and checks every
	// refusal and every "nothing changed" answer again. Zero: the store
	// is called in-process and nothing arrives late.
	Late time.Duration
	// Tolerance is how far from a hold's deadline the store may expire
	// it: the strategy's stated bound on its clocks and its reclaim. A
	// hold is held until deadline-Tolerance and expired after
	// deadline+Tolerance, by the checker's clock. Zero:
	// DefaultAdversaryTolerance.
	Tolerance time.Duration
}

// DefaultAdversaryTolerance is the hold-expiry tolerance of a run whose
// Tolerance is zero: a store and its clock on one host.
const DefaultAdversaryTolerance = 50 * time.Millisecond

// adversary is an Adversary with its defaults applied.
type adversary struct {
	Adversary
	long bool
}

func (a Adversary) withDefaults() (adversary, error) {
	out := adversary{Adversary: a}
	if out.Seed == 0 {
		if s := os.Getenv(EnvAdversarySeed); s != "" {
			seed, err := strconv.ParseUint(s, 10, 64)
			if err != nil {
				return out, fmt.Errorf("%s=%q: %v", EnvAdversarySeed, s, err)
			}
			out.Seed = seed
		}
	}
	for out.Seed == 0 {
		var b [8]byte
		rand.Read(b[:])
		out.Seed = binary.LittleEndian.Uint64(b[:]) >> 1
	}
	if out.Duration == 0 {
		switch s := os.Getenv(EnvAdversary); s {
		case "":
			out.Duration = DefaultAdversaryShort
		case "long":
			out.Duration, out.long = DefaultAdversaryLong, true
		default:
			d, err := time.ParseDuration(s)
			if err != nil || d <= 0 {
				return out, fmt.Errorf("%s=%q: want \"long\" or a duration", EnvAdversary, s)
			}
			out.Duration, out.long = d, true
		}
	}
	if out.Rounds <= 0 {
		out.Rounds = 2
		if out.long {
			out.Rounds = max(2, int(out.Duration/(10*time.Second)))
		}
	}
	if out.Workers <= 0 {
		out.Workers = 8
	}
	if out.Tolerance <= 0 {
		out.Tolerance = DefaultAdversaryTolerance
	}
	return out, nil
}

// reproduce tells how to run the same workload again.
func (a adversary) reproduce(t *testing.T) string {
	parts := strings.Split(t.Name(), "/")
	for i, p := range parts {
		parts[i] = "^" + regexp.QuoteMeta(p) + "$"
	}
	return fmt.Sprintf("adversary seed %d: repeat with %s=%d go test -race -count=1 -run '%s' (add %s=long for a long run)",
		a.Seed, EnvAdversarySeed, a.Seed, strings.Join(parts, "/"), EnvAdversary)
}

// RunOrders runs the adversary against insts, instances of Orders over
// one store (they may be different strategies on one table), and reports
// every violation as an error of t, with the seed. It needs at least one
// instance; SKUs and IDs it uses carry a random tag of their own.
func (a Adversary) RunOrders(t *testing.T, insts []stockguard.Orders) {
	t.Helper()
	cfg, err := a.withDefaults()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("adversary seed %d, %v, %d workers, %d instances, hold tolerance %v, late %v", cfg.Seed, cfg.Duration, cfg.Workers, len(insts), cfg.Tolerance, cfg.Late)
	vs, summary := cfg.checkOrders(t.Context(), insts)
	t.Logf("adversary: %s", summary)
	report(t, cfg, vs)
}

// CheckOrders is RunOrders returning the violations (nil: none) and the
// seed it ran, instead of reporting to a test.
func (a Adversary) CheckOrders(ctx context.Context, insts []stockguard.Orders) (uint64, []Violation) {
	cfg, err := a.withDefaults()
	if err != nil {
		return 0, []Violation{{Case: "Adversary", Detail: err.Error()}}
	}
	vs, _ := cfg.checkOrders(ctx, insts)
	return cfg.Seed, vs
}

// maxReported bounds the violations a run reports: the first ones say
// what went wrong, the rest repeat it.
const maxReported = 25

func report(t *testing.T, cfg adversary, vs []Violation) {
	t.Helper()
	if len(vs) == 0 {
		return
	}
	for i, v := range vs {
		if i == maxReported {
			t.Errorf("… and %d more violations", len(vs)-maxReported)
			break
		}
		t.Error(v)
	}
	t.Error(cfg.reproduce(t))
}

// runTag returns a random tag for the names of one run, so that runs with
// one seed on one store never see each other's SKUs and IDs.
func runTag() string {
	var b [4]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// violations collects violations from concurrent workers.
type violations struct {
	mu sync.Mutex
	vs []Violation
}

func (v *violations) add(format string, args ...any) {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.vs = append(v.vs, Violation{Case: "Adversary", Detail: fmt.Sprintf(format, args...)})
}

func (v *violations) list() []Violation {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.vs
}

// Deadlines of the calls that give up: from abandonMin to abandonMax, half
// of them evenly spread on a log scale, half evenly from abandonWire.
const (
	abandonMin = time.Microsecond
	abandonMax = 30 * time.Millisecond
	// abandonWire is where a round trip to a server on this host ends at
	// the soonest.
	abandonWire = 500 * time.Microsecond
	// abandonShare of the calls run under such a deadline.
	abandonShare = 0.3
	// patient is the deadline of every call that does not give up: long
	// enough that only a stuck store misses it.
	patient = 20 * time.Second
	// maxAttempts bounds the attempts at a definite answer to one call.
	maxAttempts = 40
)

// caller is the part of a worker that makes calls: the test's context,
// its random source (from the seed and the worker's number w, so that a
// seed repeats every worker's choices) and the number of instances.
type caller struct {
	ctx context.Context
	rng *mrand.Rand
	n   int
	w   int
}

func newCaller(ctx context.Context, seed uint64, w, n int) caller {
	return caller{ctx: ctx, rng: mrand.New(mrand.NewPCG(seed, uint64(w)+1)), n: n, w: w}
}

// deadline returns the deadline of the next attempt: a short one for a
// share of the first attempts, patient for the rest.
func (c *caller) deadline(attempt int) time.Duration {
	if attempt < maxAttempts/2 && c.rng.Float64() < abandonShare {
		if c.rng.IntN(2) == 0 {
			// Spread over every scale: before the request leaves, on the
			// wire, while the server works.
			lo, hi := float64(abandonMin), float64(abandonMax)
			return time.Duration(lo * math.Pow(hi/lo, c.rng.Float64()))
		}
		// While a round trip or a COMMIT is in flight, where a store that
		// forgets an abandoned write goes wrong.
		return abandonWire + time.Duration(c.rng.Int64N(int64(abandonMax-abandonWire)))
	}
	return patient
}

// nothingChanged reports whether err says that nothing was applied
// without saying why not: ErrContention, ErrUnavailable or the context's
// error, but not ErrOutcomeUnknown.
func nothingChanged(err error) bool {
	switch {
	case err == nil, errors.Is(err, stockguard.ErrOutcomeUnknown):
		return false
	}
	return errors.Is(err, stockguard.ErrContention) ||
		errors.Is(err, stockguard.ErrUnavailable) ||
		errors.Is(err, context.DeadlineExceeded) ||
		errors.Is(err, context.Canceled)
}

// definite reports whether err is an answer that says what happened.
func definite(err error) bool {
	switch {
	case err == nil:
		return true
	case errors.Is(err, stockguard.ErrOutcomeUnknown),
		errors.Is(err, stockguard.ErrContention),
		errors.Is(err, stockguard.ErrUnavailable),
		errors.Is(err, context.DeadlineExceeded),
		errors.Is(err, context.Canceled):
		return false
	}
	return true
}

// attempt is one try at a call: the instance, its deadline, its answer,
// and when, by the client's clock, it was sent and its answer came.
type attempt struct {
	inst      int
	deadline  time.Duration
	err       error
	sent, ret time.Time
}

// span is the time from the first attempt's sending to the last one's
// answer: where anything the call applied happened.
type span struct{ s, r time.Time }

func spanOf(ts []attempt) span { return span{ts[0].sent, ts[len(ts)-1].ret} }

func (a attempt) String() string {
	d := "patient"
	if a.deadline != patient {
		d = a.deadline.String()
	}
	return fmt.Sprintf("inst %d/%s: %s", a.inst, d, answer(a.err))
}

// answer names err by its contract error, or in full outside the
// contract.
func answer(err error) string {
	if err == nil {
		return "nil"
	}
	if c := strategy.Contract(err); c != nil {
		if errors.Is(err, stockguard.ErrOutcomeUnknown) {
			return stockguard.ErrOutcomeUnknown.Error()
		}
		return c.Error()
	}
	return fmt.Sprintf("%v (outside the contract)", err)
}

// repeat calls call on a random instance until its answer is definite and
// returns every attempt and that answer; with stop set, it stops too when
// the first attempt's answer says nothing changed. ok is false when the test's context ended or no attempt was definite.
func (c *caller) repeat(stop bool, call func(ctx context.Context, inst int) error) (tries []attempt, ok bool, err error) {
	for i := range maxAttempts {
		if c.ctx.Err() != nil {
			return tries, false, nil
		}
		a := attempt{inst: c.rng.IntN(c.n), deadline: c.deadline(i)}
		ctx, cancel := context.WithTimeout(c.ctx, a.deadline)
		a.sent = time.Now()
		a.err = call(ctx, a.inst)
		a.ret = time.Now()
		cancel()
		tries = append(tries, a)
		if definite(a.err) {
			return tries, true, a.err
		}
		if stop && i == 0 && nothingChanged(a.err) {
			// Only a first attempt: after one that may have applied, a
			// later "nothing changed" says nothing about the ID.
			return tries, true, a.err
		}
		if i >= maxAttempts/2 && !errors.Is(a.err, stockguard.ErrContention) {
			// Patient attempts that fail anyway: give the store a moment.
			time.Sleep(10 * time.Millisecond)
		}
	}
	return tries, false, nil
}

// patiently calls call once on a random instance with a patient deadline.
func (c *caller) patiently(call func(ctx context.Context, inst int) error) attempt {
	a := attempt{inst: c.rng.IntN(c.n), deadline: patient}
	ctx, cancel := context.WithTimeout(c.ctx, patient)
	defer cancel()
	a.sent = time.Now()
	a.err = call(ctx, a.inst)
	a.ret = time.Now()
	return a
}
