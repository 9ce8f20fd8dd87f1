package stocktest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/stockguard/stockguard"
	"github.com/stockguard/stockguard/internal/errtext"
	"github.com/stockguard/stockguard/strategy"
)

// Violation is one way an Inventory or Orders broke the contract.
type Violation struct {
	Case   string // the conformance case that found it
	Detail string
}

func (v Violation) String() string { return v.Case + ": " + v.Detail }

// Subject is what a case checks.
type Subject struct {
	// New returns an instance of the Inventory under test. Every instance
	// works on the same store, as two processes of one application would.
	New func() stockguard.Inventory
	// SKU derives from base a SKU unique to this run, so that cases sharing
	// a server never see each other's data.
	SKU func(base string) string
}

// Case is one conformance check. Check returns the violations it found.
type Case struct {
	Name  string
	Check func(ctx context.Context, s Subject) []Violation
}

// Suite configures the conformance cases. The zero value uses the defaults.
type Suite struct {
	// Goroutines decrementing concurrently in the conservation cases, spread
	// evenly over two instances. Default 64.
	Goroutines int
	// Stock is the initial stock of the one-SKU conservation case. Default 400.
	Stock int64
	// SKUs is the number of SKUs of the many-SKU conservation case, each
	// stocked with Stock/SKUs units. Default 16.
	SKUs int
	// Timeout bounds each conservation case and the linearizability case.
	// Default 2 minutes.
	Timeout time.Duration
	// StockNotLinearizable declares that Stock only promises a level between
	// those at the start and at the end of the call, as a sum of levels read
	// one after another does. Linearizable/OneSKU then leaves Stock reads
	// made while Decrements run out of its history, and still checks the
	// Decrements and one Stock read made after all of them returned. The
	// same goes for the Stock and Order reads of Linearizable/OneOrder.
	// Default false: every Stock and Order read must be linearizable.
	StockNotLinearizable bool
	// Footprint, when set, counts what the store under test holds: the keys
	// under the instances' prefix, the rows of their tables. The UnknownSKU
	// cases check that requests for SKUs never stocked (and, for Orders,
	// IDs never used) leave it unchanged, because nothing may be created
	// for them. It must count only what this suite's instances write, and
	// nothing else may write or delete there while the suite runs (no
	// other test on the same prefix or tables, no purge or sweeper).
	// Default nil: not checked.
	Footprint func(ctx context.Context) (int64, error)
	// HoldTTL is the ttl of the holds the order cases leave to expire.
	// Default 250 ms.
	HoldTTL time.Duration
	// ClockSkew is how far a hold's deadline, kept by the backend's clock,
	// may be from the client's clock plus the ttl. Default 5 s.
	ClockSkew time.Duration
}

func (s Suite) withDefaults() Suite {
	if s.Goroutines <= 0 {
		s.Goroutines = 64
	}
	if s.Stock <= 0 {
		s.Stock = 400
	}
	if s.SKUs <= 0 {
		s.SKUs = 16
	}
	if s.Timeout <= 0 {
		s.Timeout = 2 * time.Minute
	}
	if s.HoldTTL <= 0 {
		s.HoldTTL = 250 * time.Millisecond
	}
	if s.ClockSkew <= 0 {
		s.ClockSkew = 5 * time.Second
	}
	return s
}

// Run runs the default Suite as subtests of t. newInv is called for every
// instance a case needs; all instances it returns within one call of Run
// must share one store.
func Run(t *testing.T, newInv func(t *testing.T) stockguard.Inventory) {
	t.Helper()
	Suite{}.Run(t, newInv)
}

// Run runs every case of s as a subtest of t, reporting each violation as
// a test error.
func (s Suite) Run(t *testing.T, newInv func(t *testing.T) stockguard.Inventory) {
	t.Helper()
	for _, c := range s.Cases() {
		t.Run(c.Name, func(t *testing.T) {
			subj := NewSubject(func() stockguard.Inventory { return newInv(t) })
			for _, v := range c.Check(t.Context(), subj) {
				t.Error(v)
			}
		})
	}
}

// Check runs every case of s against newInv and returns all violations; nil
// means the Inventory conforms.
func (s Suite) Check(ctx context.Context, newInv func() stockguard.Inventory) []Violation {
	var all []Violation
	for _, c := range s.Cases() {
		all = append(all, c.Check(ctx, NewSubject(newInv))...)
	}
	return all
}

// NewSubject returns a Subject over newInv with a fresh random SKU tag.
func NewSubject(newInv func() stockguard.Inventory) Subject {
	var b [4]byte
	rand.Read(b[:])
	tag := hex.EncodeToString(b[:])
	return Subject{
		New: newInv,
		SKU: func(base string) string { return uniqueSKU(base, tag) },
	}
}

// uniqueSKU appends "~tag" to base, trimming base (on a rune boundary) so the
// result stays within MaxSKULen.
func uniqueSKU(base, tag string) string {
	suffix := "~" + tag
	for len(base)+len(suffix) > stockguard.MaxSKULen {
		_, size := utf8.DecodeLastRuneInString(base)
		base = base[:len(base)-size]
	}
	return base + suffix
}

// Cases returns the conformance cases of s.
func (s Suite) Cases() []Case {
	s = s.withDefaults()
	return []Case{
		named("RoundTrip", checkRoundTrip),
		named("Decrement", checkDecrement),
		named("SellOut", checkSellOut),
		named("Insufficient", checkInsufficient),
		named("UnknownSKU", s.checkUnknownSKU),
		named("InvalidInput", checkInvalidInput),
		named("NilContext", checkNilContext),
		named("OddSKUs", checkOddSKUs),
		named("CanceledContext", checkCanceled),
		named("Conservation/OneSKU", func(ctx context.Context, subj Subject, r *recorder) {
			s.conservation(ctx, subj, r, 1, s.Stock)
		}),
		named("Conservation/ManySKUs", func(ctx context.Context, subj Subject, r *recorder) {
			s.conservation(ctx, subj, r, s.SKUs, max(1, s.Stock/int64(s.SKUs)))
		}),
		named("Linearizable/OneSKU", s.linearizable),
	}
}

// named makes a Case whose check reports through a recorder carrying the
// case's name, so that the name is written once.
func named(name string, check func(ctx context.Context, s Subject, r *recorder)) Case {
	return Case{Name: name, Check: func(ctx context.Context, s Subject) []Violation {
		r := &recorder{name: name}
		check(ctx, s, r)
		return r.vs
	}}
}

// recorder collects a case's violations.
type recorder struct {
	name string
	vs   []Violation
}

func (r *recorder) add(format string, args ...any) {
	r.vs = append(r.vs, Violation{Case: r.name, Detail: fmt.Sprintf(format, args...)})
}

// contract records err if it is not one of the errors the contract allows,
// or if its text does not start with its contract error's: one text per
// contract error on every backend, the backend's detail after it.
func (r *recorder) contract(op string, err error) {
	if err == nil {
		return
	}
	c := strategy.Contract(err)
	switch {
	case c == nil:
		r.add("%s returned a non-contract error: %v", op, err)
	case !textFirst(err, c):
		r.add("%s: error text %q does not start with %q, the text of the contract error it matches", op, err, c)
	}
}

// textFirst reports whether err's text starts with that of c, the contract
// error it matches (ErrFenced, which wraps ErrContention, has its own).
func textFirst(err, c error) bool {
	if errors.Is(err, stockguard.ErrFenced) {
		c = stockguard.ErrFenced
	}
	return strings.HasPrefix(err.Error(), c.Error())
}

// text records a violation unless err's text is one of wants': a contract
// condition (too little stock, an unknown SKU or order) reads the same on
// every backend.
func (r *recorder) text(op string, err error, wants ...error) {
	if err == nil {
		return
	}
	for _, w := range wants {
		if err.Error() == w.Error() {
			return
		}
	}
	r.add("%s: error text %q, want %q", op, err, wants[0])
}

// expect records a violation unless err matches want (nil means success).
func (r *recorder) expect(op string, err, want error) bool {
	r.contract(op, err)
	switch {
	case want == nil && err != nil:
		r.add("%s: want success, got %v", op, err)
	case want != nil && !errors.Is(err, want):
		r.add("%s: want %v, got %v", op, want, err)
	default:
		return true
	}
	return false
}

// level records a violation unless sku's stock reads as want.
func (r *recorder) level(ctx context.Context, inv stockguard.Inventory, sku string, want int64) {
	got, err := inv.Stock(ctx, sku)
	if r.expect(fmt.Sprintf("Stock(%q)", sku), err, nil) && got != want {
		r.add("Stock(%q) = %d, want %d", sku, got, want)
	}
}

func (r *recorder) set(ctx context.Context, inv stockguard.Inventory, sku string, qty int64) bool {
	return r.expect(fmt.Sprintf("SetStock(%q, %d)", sku, qty), inv.SetStock(ctx, sku, qty), nil)
}

func (r *recorder) dec(ctx context.Context, inv stockguard.Inventory, sku string, qty int64, want error) {
	r.expect(fmt.Sprintf("Decrement(%q, %d)", sku, qty), inv.Decrement(ctx, sku, qty), want)
}

// short decrements qty of sku, which has have units left, and records a
// violation unless it is refused as insufficient, in the words of
// errtext.Insufficient (with the level, or without it).
func (r *recorder) short(ctx context.Context, inv stockguard.Inventory, sku string, have, qty int64) {
	op := fmt.Sprintf("Decrement(%q, %d)", sku, qty)
	err := inv.Decrement(ctx, sku, qty)
	if r.expect(op, err, stockguard.ErrInsufficientStock) {
		r.text(op, err, errtext.Insufficient(sku, have, qty), errtext.Insufficient(sku, errtext.Unknown, qty))
	}
}

func checkRoundTrip(ctx context.Context, s Subject, r *recorder) {
	a, b := s.New(), s.New()
	sku := s.SKU("roundtrip")
	for _, qty := range []int64{42, 7, 0, stockguard.MaxQty} {
		if r.set(ctx, a, sku, qty) {
			r.level(ctx, a, sku, qty)
			r.level(ctx, b, sku, qty)
		}
	}
	// MaxQty is where a double-based implementation (Redis Lua) would round.
	r.dec(ctx, b, sku, 1, nil)
	r.level(ctx, a, sku, stockguard.MaxQty-1)
}

func checkDecrement(ctx context.Context, s Subject, r *recorder) {
	a, b := s.New(), s.New()
	sku := s.SKU("decrement")
	if r.set(ctx, a, sku, 10) {
		r.dec(ctx, a, sku, 3, nil)
		r.level(ctx, b, sku, 7)
		r.dec(ctx, b, sku, 2, nil)
		r.level(ctx, a, sku, 5)
	}
}

func checkSellOut(ctx context.Context, s Subject, r *recorder) {
	inv := s.New()
	sku := s.SKU("sellout")
	if r.set(ctx, inv, sku, 5) {
		r.dec(ctx, inv, sku, 5, nil)
		r.level(ctx, inv, sku, 0)
		r.short(ctx, inv, sku, 0, 1)
		r.level(ctx, inv, sku, 0)
	}
}

func checkInsufficient(ctx context.Context, s Subject, r *recorder) {
	inv := s.New()
	sku := s.SKU("insufficient")
	if r.set(ctx, inv, sku, 5) {
		r.short(ctx, inv, sku, 5, 6)
		r.short(ctx, inv, sku, 5, stockguard.MaxQty)
		r.level(ctx, inv, sku, 5)
	}
}

func (s Suite) checkUnknownSKU(ctx context.Context, subj Subject, r *recorder) {
	inv := subj.New()
	sku := subj.SKU("never-stocked")
	s.unchanged(ctx, r, "Decrement and Stock of never-stocked SKUs", func() {
		op := fmt.Sprintf("Decrement(%q, 1)", sku)
		if err := inv.Decrement(ctx, sku, 1); r.expect(op, err, stockguard.ErrUnknownSKU) {
			r.text(op, err, errtext.UnknownSKU(sku))
		}
		// A DECRBY on a missing Redis key would have created it at -1.
		_, err := inv.Stock(ctx, sku)
		if op := "Stock of a never-stocked SKU after Decrement"; r.expect(op, err, stockguard.ErrUnknownSKU) {
			r.text(op, err, errtext.UnknownSKU(sku))
		}
		// A fence or lock key per SKU would pile up under a scan of bad SKUs.
		for i := range 3 {
			r.dec(ctx, inv, subj.SKU(fmt.Sprintf("never-stocked-%d", i)), int64(1+i), stockguard.ErrUnknownSKU)
		}
	})
}

// unchanged runs requests that must create nothing and, when s.Footprint
// is set, records a violation if the store holds more or less afterwards.
func (s Suite) unchanged(ctx context.Context, r *recorder, what string, requests func()) {
	if s.Footprint == nil {
		requests()
		return
	}
	before, err := s.Footprint(ctx)
	if err != nil {
		r.add("Footprint before %s: %v", what, err)
		return
	}
	requests()
	after, err := s.Footprint(ctx)
	switch {
	case err != nil:
		r.add("Footprint after %s: %v", what, err)
	case after != before:
		r.add("%s left the store's footprint at %d, was %d: something was created or removed", what, after, before)
	}
}

// Invalid inputs under the contract's validation rules.
var (
	badSKUs = []string{
		"",
		strings.Repeat("x", stockguard.MaxSKULen+1),
		strings.Repeat("é", 33), // 66 bytes, 33 runes: bytes count, not runes
		"\xff\xfe",
		"half-\xe2\x82",
		"new\nline",
		"nul\x00byte",
		"tab\tsku",
		"del\x7f",
		"c1\u0085control",
	}
	badQtys   = []int64{0, -1, stockguard.MaxQty + 1, -1 << 63, 1<<63 - 1}
	badLevels = []int64{-1, stockguard.MaxQty + 1, -1 << 63, 1<<63 - 1}
)

func checkInvalidInput(ctx context.Context, s Subject, r *recorder) {
	inv := s.New()
	sku := s.SKU("valid")
	if !r.set(ctx, inv, sku, 10) {
		return
	}
	// Validation comes before any I/O, so even a dead context must yield
	// ErrInvalidRequest, not a context error.
	dead, cancel := context.WithCancel(ctx)
	cancel()
	for _, c := range []context.Context{ctx, dead} {
		for _, bad := range badSKUs {
			r.dec(c, inv, bad, 1, stockguard.ErrInvalidRequest)
			r.expect(fmt.Sprintf("SetStock(%q, 1)", bad), inv.SetStock(c, bad, 1), stockguard.ErrInvalidRequest)
			_, err := inv.Stock(c, bad)
			r.expect(fmt.Sprintf("Stock(%q)", bad), err, stockguard.ErrInvalidRequest)
		}
		for _, q := range badQtys {
			r.dec(c, inv, sku, q, stockguard.ErrInvalidRequest)
		}
		for _, q := range badLevels {
			r.expect(fmt.Sprintf("SetStock(%q, %d)", sku, q), inv.SetStock(c, sku, q), stockguard.ErrInvalidRequest)
		}
	}
	r.level(ctx, inv, sku, 10)
}

// checkOddSKUs stocks SKUs that look like SQL, Redis patterns or hash tags,
// or differ only in case, trailing space or Unicode normalisation, and checks
// each is its own independent SKU.
func checkOddSKUs(ctx context.Context, s Subject, r *recorder) {
	a, b := s.New(), s.New()
	tag := s.SKU("")
	odd := []string{
		"'; DROP TABLE stock;--" + tag,
		"*" + tag,
		"*",
		"{x}" + tag,
		"}" + tag,
		"a}b{c" + tag,
		`%_\` + tag,
		"库存-ü-🙂" + tag,
		"sku" + tag,
		"SKU" + tag,
		"sku" + tag + " ",
		"e\u0301" + tag, // e + combining acute
		"\u00e9" + tag,  // precomposed é
	}
	long := s.SKU(strings.Repeat("L", stockguard.MaxSKULen))
	long += strings.Repeat("L", stockguard.MaxSKULen-len(long))
	odd = append(odd, long)
	ok := true
	for i, sku := range odd {
		ok = r.set(ctx, a, sku, int64(100+i)) && ok
	}
	if !ok {
		return
	}
	for i, sku := range odd {
		r.dec(ctx, b, sku, int64(i+1), nil)
	}
	for i, sku := range odd {
		r.level(ctx, a, sku, int64(100+i)-int64(i+1))
	}
}

// checkNilContext makes every call with a nil context and otherwise valid
// input: a nil context is bad input, ErrInvalidRequest before any I/O, not
// a panic.
func checkNilContext(ctx context.Context, s Subject, r *recorder) {
	inv := s.New()
	sku := s.SKU("nil-context")
	if !r.set(ctx, inv, sku, 10) {
		return
	}
	var nilCtx context.Context
	r.expect(fmt.Sprintf("Decrement(nil ctx, %q, 1)", sku), safely(func() error { return inv.Decrement(nilCtx, sku, 1) }), stockguard.ErrInvalidRequest)
	r.expect(fmt.Sprintf("SetStock(nil ctx, %q, 99)", sku), safely(func() error { return inv.SetStock(nilCtx, sku, 99) }), stockguard.ErrInvalidRequest)
	r.expect(fmt.Sprintf("Stock(nil ctx, %q)", sku), safely(func() error { _, err := inv.Stock(nilCtx, sku); return err }), stockguard.ErrInvalidRequest)
	other := s.SKU("nil-context-new")
	r.expect(fmt.Sprintf("SetStock(nil ctx, %q, 1)", other), safely(func() error { return inv.SetStock(nilCtx, other, 1) }), stockguard.ErrInvalidRequest)
	r.level(ctx, inv, sku, 10)
	_, err := inv.Stock(ctx, other)
	r.expect("Stock of a SKU only set with a nil context", err, stockguard.ErrUnknownSKU)
}

// errPanicked marks a call that panicked instead of returning; it is
// outside the contract, so expect reports it as such.
var errPanicked = errors.New("panicked")

// safely runs call and turns a panic into an error wrapping errPanicked.
func safely(call func() error) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("%w: %v", errPanicked, p)
		}
	}()
	return call()
}

func checkCanceled(ctx context.Context, s Subject, r *recorder) {
	inv := s.New()
	sku := s.SKU("canceled")
	if !r.set(ctx, inv, sku, 10) {
		return
	}
	dead, cancel := context.WithCancel(ctx)
	cancel()
	r.dec(dead, inv, sku, 1, context.Canceled)
	if err := inv.SetStock(dead, sku, 99); err == nil {
		r.add("SetStock with a canceled context succeeded")
	} else {
		r.contract("SetStock with a canceled context", err)
	}
	if _, err := inv.Stock(dead, sku); err == nil {
		r.add("Stock with a canceled context succeeded")
	} else {
		r.contract("Stock with a canceled context", err)
	}
	other := s.SKU("canceled-new")
	r.dec(dead, inv, other, 1, context.Canceled)
	r.level(ctx, inv, sku, 10)
	_, err := inv.Stock(ctx, other)
	r.expect("Stock of a SKU only touched with a canceled context", err, stockguard.ErrUnknownSKU)
}
