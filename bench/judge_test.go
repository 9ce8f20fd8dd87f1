package bench

import (
	"context"
	"strings"
	"testing"

	"github.com/stockguard/stockguard"
	"github.com/stockguard/stockguard/internal/counterexample"
	"github.com/stockguard/stockguard/internal/memorders"
	"github.com/stockguard/stockguard/internal/memstock"
)

// The tests here check the judge itself: a strategy wrong on one path must
// be found unsound under the default workload (the default checkout for
// the order paths), in every run. Each wrong strategy's fault is keyed on a
// call counter and each run is a fixed count of requests drawn from seeded
// sequences, so nothing rests on timing.

// wrapTarget is a target of instances wrap builds over one shared
// memstock.Store, read raw through the store itself.
func wrapTarget(name string, wrap func(s *memstock.Store) stockguard.Inventory) Target {
	return Target{
		Name: name, About: name,
		Open: func(context.Context, Servers, string) (*Store, error) {
			s := memstock.New()
			return &Store{New: func() (stockguard.Inventory, error) { return wrap(s), nil }, Raw: s.Stock}, nil
		},
	}
}

// defaultCheckout is the default workload as a checkout (stockbench
// -workload checkout: one hot SKU), ending after ops orders.
func defaultCheckout(ops int64) Workload {
	w := defaultOps(8, ops)
	w.Shape = Checkout
	return w
}

func TestJudge_decrementPaths(t *testing.T) {
	for _, tc := range []struct {
		name   string
		target Target
		caught func(a Audit) bool
	}{
		// A stock driven below zero cannot be read through Stock: the
		// audit reads the backend and fails (unsound), never passes.
		{"below zero, unreadable", fakeTarget("no-check", faultNoCheckUnreadable), func(a Audit) bool {
			return a.Failed != "" && a.Oversold > 0
		}},
		{"below zero", fakeTarget("no-check", faultNoCheck), func(a Audit) bool { return a.Oversold > 0 }},
		{"ack without a write when qty ≥ 2", wrapTarget("ack-multi", func(s *memstock.Store) stockguard.Inventory {
			return counterexample.NewAckMulti(s)
		}), func(a Audit) bool { return a.Oversold > 0 }},
		{"unknown having done nothing, taken twice", wrapTarget("flaky-unknown", func(s *memstock.Store) stockguard.Inventory {
			return counterexample.NewFlakyUnknown(s)
		}), func(a Audit) bool { return a.Unresolved > 0 && a.Gone > a.Acked }},
		{"rare ack without a write", wrapTarget("rare", func(s *memstock.Store) stockguard.Inventory {
			return counterexample.NewRare(s, counterexample.RareAckNoWrite)
		}), func(a Audit) bool { return a.Oversold > 0 }},
		{"rare double write", wrapTarget("rare", func(s *memstock.Store) stockguard.Inventory {
			return counterexample.NewRare(s, counterexample.RareDoubleWrite)
		}), func(a Audit) bool { return a.Lost > 0 }},
		{"rare false refusal", wrapTarget("rare", func(s *memstock.Store) stockguard.Inventory {
			return counterexample.NewRare(s, counterexample.RareFalseRefusal)
		}), func(a Audit) bool { return a.FalseRefusals > 0 }},
		{"rare refusal after taking", wrapTarget("rare", func(s *memstock.Store) stockguard.Inventory {
			return counterexample.NewRare(s, counterexample.RareRefuseAfterTake)
		}), func(a Audit) bool { return a.Lost > 0 }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, err := Run(t.Context(), tc.target, nil, defaultOps(8, 4_000))
			if err != nil {
				t.Fatal(err)
			}
			if r.Sound() || !tc.caught(r.Audit) {
				t.Errorf("not caught: sound %v, audit %+v", r.Sound(), r.Audit)
			}
		})
	}
}

// TestJudge_defaultDrains: the default workload sells a SKU out and asks
// for more than one unit at a time, and a sound store passes it.
func TestJudge_defaultDrains(t *testing.T) {
	w := defaultOps(8, 2_000)
	r, err := Run(t.Context(), memTarget(), nil, w)
	if err != nil {
		t.Fatal(err)
	}
	wantSound(t, r, true)
	// 8 workers ask for 1+2+3+1 units each of a SKU stocked with 4 each.
	if a := r.Audit; a.Initial != DefaultSteadyStock+32 || r.Errors["insufficient"] == 0 || r.Units <= r.Successes {
		t.Errorf("audit %+v, %d units in %d successes, errors %v: want the drain SKU sold out, some requests of more than one unit",
			a, r.Units, r.Successes, r.Errors)
	}
	if a := r.Audit; a.Final != a.Initial-a.Acked || a.Final >= DefaultSteadyStock {
		t.Errorf("audit %+v", a)
	}
}

func TestJudge_orderPaths(t *testing.T) {
	for _, tc := range []struct {
		name   string
		wrap   func(s *memorders.Store) stockguard.Inventory
		caught func(a Audit) bool
	}{
		{"refused order recorded (phantom)", func() func(s *memorders.Store) stockguard.Inventory {
			var book counterexample.Book
			return func(s *memorders.Store) stockguard.Inventory { return counterexample.NewPhantom(s, &book) }
		}(), func(a Audit) bool { return a.BadOrders > 0 }},
		{"expired hold back only when read", func() func(s *memorders.Store) stockguard.Inventory {
			var book counterexample.Book
			return func(s *memorders.Store) stockguard.Inventory { return counterexample.NewLazyExpiry(s, &book) }
		}(), func(a Audit) bool { return a.Lost > 0 }},
		{"restocks unknown, takes put back", func() func(s *memorders.Store) stockguard.Inventory {
			var book counterexample.Book
			return func(s *memorders.Store) stockguard.Inventory { return counterexample.NewFlakyRestock(s, &book) }
		}(), func(a Audit) bool { return a.Oversold > 0 && a.Restocked > 0 }},
		{"Return of an expired hold gives back again", func(s *memorders.Store) stockguard.Inventory {
			return counterexample.NewReturnExpiredTwice(s)
		}, func(a Audit) bool { return a.Oversold > 0 }},
		{"a repeated Take takes again", func(s *memorders.Store) stockguard.Inventory {
			return retaker{s}
		}, func(a Audit) bool { return a.Lost > 0 }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, err := Run(t.Context(), ordersTarget(tc.name, tc.wrap), nil, defaultCheckout(800))
			if err != nil {
				t.Fatal(err)
			}
			if r.Sound() || !tc.caught(r.Audit) {
				t.Errorf("not caught: sound %v, audit %+v", r.Sound(), r.Audit)
			}
		})
	}
}

// TestJudge_defaultCheckoutSound: the same runs on the sound store pass,
// with refused carts read back, restocks and late calls made.
func TestJudge_defaultCheckoutSound(t *testing.T) {
	r, err := Run(t.Context(), ordersTarget("memorders", func(s *memorders.Store) stockguard.Inventory { return s }), nil, defaultCheckout(800))
	if err != nil {
		t.Fatal(err)
	}
	wantSound(t, r, true)
	if a := r.Audit; r.Errors["insufficient"] == 0 || a.Restocked == 0 || a.Orders <= r.Successes || a.Held != 0 {
		t.Errorf("audit %+v, errors %v: want refused carts read back and restocks", a, r.Errors)
	}
}

// TestAudit_soundNeedsEverything: any finding, a mismatch between Stock
// and the backend or an unresolved outcome alone included, is unsound.
func TestAudit_soundNeedsEverything(t *testing.T) {
	for _, a := range []Audit{{Mismatches: 1}, {Unresolved: 1}, {Failed: "Stock: no"}, {BadOrders: 1}} {
		if a.Sound() {
			t.Errorf("%+v is sound", a)
		}
	}
	if !(Audit{Unknown: 3, Reconciled: 3}).Sound() {
		t.Error("reconciled unknown outcomes are unsound")
	}
}

// TestWriteTable_failedAudit: an audit that could not complete reads
// FAILED in the table and sound: false in JSON.
func TestWriteTable_failedAudit(t *testing.T) {
	r, err := Run(t.Context(), fakeTarget("unreadable", faultNoCheckUnreadable), nil, defaultOps(4, 400))
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	if err := WriteTable(&b, []*Result{r}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), "FAILED: audit incomplete") || !strings.Contains(b.String(), "could not complete") {
		t.Errorf("table:\n%s", b.String())
	}
	if row := NewRow(r); row.Sound || row.AuditFailed == "" {
		t.Errorf("row: sound %v, audit_failed %q", row.Sound, row.AuditFailed)
	}
}

// retaker takes a taken order's units again when its Take is repeated.
type retaker struct{ *memorders.Store }

func (r retaker) Take(ctx context.Context, id string, lines ...stockguard.Line) error {
	if info, err := r.Order(ctx, id); err == nil && info.State == stockguard.OrderTaken {
		for _, l := range lines {
			r.Decrement(ctx, l.SKU, l.Qty)
		}
		return nil
	}
	return r.Store.Take(ctx, id, lines...)
}
