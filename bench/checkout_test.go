package bench

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stockguard/stockguard"
	"github.com/stockguard/stockguard/internal/counterexample"
	"github.com/stockguard/stockguard/internal/memorders"
)

// ordersTarget is a target of instances wrap builds over one shared
// memorders.Store (the in-memory reference), read raw through the store
// itself.
func ordersTarget(name string, wrap func(s *memorders.Store) stockguard.Inventory) Target {
	return Target{
		Name: name, About: name, Orders: true,
		Open: func(context.Context, Servers, string) (*Store, error) {
			s := memorders.New()
			return &Store{
				New: func() (stockguard.Inventory, error) { return wrap(s), nil },
				Raw: s.Stock,
			}, nil
		},
	}
}

// lossy is a sound Orders whose every 7th successful Take or Hold loses
// its reply (ErrOutcomeUnknown, but applied): repeating the call with the
// same ID tells the outcome.
type lossy struct {
	*memorders.Store
	n atomic.Int64
}

func (l *lossy) lose(err error) error {
	if err == nil && l.n.Add(1)%7 == 0 {
		return fmt.Errorf("%w: reply lost", stockguard.ErrOutcomeUnknown)
	}
	return err
}

func (l *lossy) Take(ctx context.Context, id string, lines ...stockguard.Line) error {
	return l.lose(l.Store.Take(ctx, id, lines...))
}

func (l *lossy) Hold(ctx context.Context, id string, ttl time.Duration, lines ...stockguard.Line) error {
	return l.lose(l.Store.Hold(ctx, id, ttl, lines...))
}

func checkoutWorkload() Workload {
	w := DefaultWorkload()
	w.Shape, w.SKUs, w.Skew = Checkout, 8, Skew{Zipf: 1.1}
	w.Stock = 400
	w.Workers, w.Instances = 4, 2
	w.Duration, w.Warmup, w.Ops = 0, 0, 1500
	w.Orders.HoldTTL = 20 * time.Millisecond
	w.Orders.ShortShare = 0.1
	return w
}

func TestRun_checkoutMemOrdersSound(t *testing.T) {
	for name, wrap := range map[string]func(s *memorders.Store) stockguard.Inventory{
		"memorders": func(s *memorders.Store) stockguard.Inventory { return s },
		"lossy":     func(s *memorders.Store) stockguard.Inventory { return &lossy{Store: s} },
	} {
		t.Run(name, func(t *testing.T) {
			res, err := Run(t.Context(), ordersTarget(name, wrap), nil, checkoutWorkload())
			if err != nil {
				t.Fatal(err)
			}
			a := res.Audit
			if !res.Sound() {
				t.Fatalf("unsound: %+v", a)
			}
			if res.Successes == 0 || res.Lines < res.Successes || res.LineRate <= 0 || a.Orders == 0 || a.Restocked == 0 || a.Taken == 0 {
				t.Errorf("checkout did too little: %d orders, %d lines, %+v", res.Successes, res.Lines, a)
			}
			if a.Held != 0 {
				t.Errorf("%d units still held after every deadline", a.Held)
			}
			if res.Errors["insufficient"] == 0 {
				t.Errorf("no cart was refused (short carts, 400 units per SKU): %v", res.Errors)
			}
			if got := a.Initial + a.Restocked - a.RawFinal; got != a.Taken {
				t.Errorf("initial %d + restocked %d - final %d = %d, taken %d", a.Initial, a.Restocked, a.RawFinal, got, a.Taken)
			}
			if name == "lossy" && (a.Unknown == 0 || a.Reconciled != a.Unknown) {
				t.Errorf("lost replies: %d unknown, %d reconciled; want every one reconciled", a.Unknown, a.Reconciled)
			}
		})
	}
}

func TestRun_checkoutCounterexamplesCaught(t *testing.T) {
	tests := []struct {
		name   string
		wrap   func(s *memorders.Store) stockguard.Inventory
		caught func(a Audit) bool
	}{
		{"retry-without-id", func(s *memorders.Store) stockguard.Inventory { return counterexample.NewRetryWithoutID(s, 0) },
			func(a Audit) bool { return a.Duplicated > 0 }},
		{"line-by-line", func(s *memorders.Store) stockguard.Inventory { return counterexample.NewLineByLine(s) },
			func(a Audit) bool { return a.Lost > 0 }},
		{"client-timer", func() func(s *memorders.Store) stockguard.Inventory {
			book := counterexample.NewHoldBook()
			return func(s *memorders.Store) stockguard.Inventory { return counterexample.NewClientTimer(s, book, 0) }
		}(), func(a Audit) bool { return a.Lost > 0 && a.BadOrders > 0 }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res, err := Run(t.Context(), ordersTarget(tt.name, tt.wrap), nil, checkoutWorkload())
			if err != nil {
				t.Fatal(err)
			}
			if res.Sound() || !tt.caught(res.Audit) {
				t.Errorf("not caught: sound %v, %+v", res.Sound(), res.Audit)
			}
		})
	}
}

func TestRun_checkoutSkips(t *testing.T) {
	w := checkoutWorkload()
	if _, err := Run(t.Context(), memTarget(), nil, w); !errors.Is(err, ErrSkipped) {
		t.Errorf("checkout on an Inventory: %v, want ErrSkipped", err)
	}
	only := ordersTarget("only", func(s *memorders.Store) stockguard.Inventory { return s })
	only.OrdersOnly = true
	w.Shape = Steady
	if _, err := Run(t.Context(), only, nil, w); !errors.Is(err, ErrSkipped) {
		t.Errorf("an OrdersOnly target under steady: %v, want ErrSkipped", err)
	}
}

func TestCompareLines(t *testing.T) {
	l := func(sku string, q int64) stockguard.Line { return stockguard.Line{SKU: sku, Qty: q} }
	for _, tt := range []struct {
		placed, recorded []stockguard.Line
		dup              int64
		other            bool
	}{
		{[]stockguard.Line{l("a", 1), l("b", 2)}, []stockguard.Line{l("b", 2), l("a", 1)}, 0, false},
		{[]stockguard.Line{l("a", 1), l("b", 2)}, []stockguard.Line{l("a", 2), l("b", 4)}, 3, false},
		{[]stockguard.Line{l("a", 1), l("b", 2)}, []stockguard.Line{l("a", 1)}, 0, true},
		{[]stockguard.Line{l("a", 1)}, []stockguard.Line{l("a", 1), l("c", 1)}, 0, true},
		{[]stockguard.Line{l("a", 3)}, []stockguard.Line{l("a", 1)}, 0, true},
	} {
		dup, other := compareLines(tt.placed, tt.recorded)
		if dup != tt.dup || other != tt.other {
			t.Errorf("compareLines(%v, %v) = %d, %v; want %d, %v", tt.placed, tt.recorded, dup, other, tt.dup, tt.other)
		}
	}
}

func TestWorkload_LinesText(t *testing.T) {
	for _, tc := range []struct {
		lines, skus int
		want        string
	}{
		{3, 1, "1 line"},
		{1, 100, "1 line"},
		{3, 2, "1–2 lines"},
		{3, 100, "1–3 lines"},
	} {
		w := Workload{SKUs: tc.skus, Orders: OrderMix{Lines: tc.lines}}
		if got := w.LinesText(); got != tc.want {
			t.Errorf("%d lines over %d SKUs: %q, want %q", tc.lines, tc.skus, got, tc.want)
		}
	}
}
