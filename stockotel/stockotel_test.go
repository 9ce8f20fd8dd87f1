package stockotel_test

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"

	"github.com/stockguard/stockguard"
	"github.com/stockguard/stockguard/internal/memorders"
	"github.com/stockguard/stockguard/stockotel"
	"github.com/stockguard/stockguard/stocktest"
	sgstrategy "github.com/stockguard/stockguard/strategy"
)

func wrapped(r *recorder, inner stockguard.Orders) *stockotel.Orders {
	return stockotel.WrapOrders(inner,
		stockotel.WithMeterProvider(r), stockotel.WithTracerProvider(r), stockotel.WithStrategy("mem"))
}

// The wrapper changes no answer: it passes the conformance suites.
func TestWrapOrders_conformance(t *testing.T) {
	// The suites open several handles on one store, as on one database.
	r := newRecorder()
	orders := memorders.New()
	stocktest.RunOrders(t, func(*testing.T) stockguard.Orders { return wrapped(r, orders) })
	inv := memorders.New()
	stocktest.Run(t, func(*testing.T) stockguard.Inventory {
		return stockotel.Wrap(inv, stockotel.WithMeterProvider(r), stockotel.WithTracerProvider(r))
	})
}

func attrs(op, outcome string) []attribute.KeyValue {
	return []attribute.KeyValue{
		attribute.String(stockotel.AttrStrategy, "mem"),
		attribute.String(stockotel.AttrOperation, op),
		attribute.String(stockotel.AttrOutcome, outcome),
	}
}

func TestWrap_Decrement_countsByOutcome(t *testing.T) {
	ctx := t.Context()
	r := newRecorder()
	inv := wrapped(r, memorders.New())
	if err := inv.SetStock(ctx, "sku-a", 3); err != nil {
		t.Fatal(err)
	}
	for range 5 {
		_ = inv.Decrement(ctx, "sku-a", 1)
	}
	_ = inv.Decrement(ctx, "never-stocked", 1)
	_ = inv.Decrement(ctx, "sku-a", 0)

	for _, tc := range []struct {
		outcome string
		want    float64
	}{
		{stockotel.OutcomeOK, 3},
		{stockotel.OutcomeInsufficientStock, 2},
		{stockotel.OutcomeUnknownSKU, 1},
		{stockotel.OutcomeInvalidRequest, 1},
	} {
		a := attrs(stockotel.OpDecrement, tc.outcome)
		if got := r.sum(stockotel.MetricOperations, a...); got != tc.want {
			t.Errorf("%s{%s} = %v, want %v", stockotel.MetricOperations, tc.outcome, got, tc.want)
		}
		if got := r.count(stockotel.MetricDuration, a...); got != int(tc.want) {
			t.Errorf("%s{%s} has %d records, want %v", stockotel.MetricDuration, tc.outcome, got, tc.want)
		}
	}
	plain := []attribute.KeyValue{
		attribute.String(stockotel.AttrStrategy, "mem"),
		attribute.String(stockotel.AttrOperation, stockotel.OpDecrement),
	}
	if got := r.sum(stockotel.MetricUnitsTaken, plain...); got != 3 {
		t.Errorf("units taken = %v, want 3", got)
	}
}

// SKUs are span attributes, never metric attributes: every metric key
// recorded must be free of them.
func TestWrap_skuOnlyOnSpans(t *testing.T) {
	ctx := t.Context()
	r := newRecorder()
	inv := wrapped(r, memorders.New())
	_ = inv.SetStock(ctx, "secret-sku", 5)
	_ = inv.Decrement(ctx, "secret-sku", 2)
	_ = inv.Hold(ctx, "order-1", time.Minute, stockguard.Line{SKU: "secret-sku", Qty: 1})
	r.mu.Lock()
	defer r.mu.Unlock()
	for k := range r.sums {
		if containsAny(k, "secret-sku", "order-1") {
			t.Errorf("metric key %q carries a SKU or order ID", k)
		}
	}
	var found bool
	for _, s := range r.spans {
		if s.name == "stockguard.Decrement" {
			found = true
			if got := s.attrs[stockotel.AttrSKU].AsString(); got != "secret-sku" {
				t.Errorf("span sku = %q", got)
			}
			if got := s.attrs[stockotel.AttrQty].AsInt64(); got != 2 {
				t.Errorf("span qty = %d", got)
			}
			if !s.ended {
				t.Error("span not ended")
			}
		}
	}
	if !found {
		t.Error("no stockguard.Decrement span")
	}
}

func containsAny(s string, subs ...string) bool {
	for _, sub := range subs {
		for i := 0; i+len(sub) <= len(s); i++ {
			if s[i:i+len(sub)] == sub {
				return true
			}
		}
	}
	return false
}

func TestWrapOrders_ordersByOutcomeAndState(t *testing.T) {
	ctx := t.Context()
	r := newRecorder()
	o := wrapped(r, memorders.New())
	if err := o.SetStock(ctx, "s", 10); err != nil {
		t.Fatal(err)
	}
	line := stockguard.Line{SKU: "s", Qty: 2}
	if err := o.Hold(ctx, "o1", time.Minute, line); err != nil {
		t.Fatal(err)
	}
	if err := o.Confirm(ctx, "o1"); err != nil {
		t.Fatal(err)
	}
	if err := o.Return(ctx, "o1"); err != nil {
		t.Fatal(err)
	}
	if err := o.Confirm(ctx, "o1"); !errors.Is(err, stockguard.ErrOrderClosed) {
		t.Fatalf("Confirm after Return = %v", err)
	}
	if _, err := o.Order(ctx, "o1"); err != nil {
		t.Fatal(err)
	}
	withState := func(op, state string) []attribute.KeyValue {
		return append(attrs(op, stockotel.OutcomeOK), attribute.String(stockotel.AttrOrderState, state))
	}
	for _, tc := range []struct {
		name  string
		attrs []attribute.KeyValue
	}{
		{"hold→held", withState(stockotel.OpHold, "held")},
		{"confirm→taken", withState(stockotel.OpConfirm, "taken")},
		{"return→returned", withState(stockotel.OpReturn, "returned")},
		{"order reads returned", withState(stockotel.OpOrder, "returned")},
		{"confirm closed", attrs(stockotel.OpConfirm, stockotel.OutcomeOrderClosed)},
	} {
		if got := r.sum(stockotel.MetricOrders, tc.attrs...); got != 1 {
			t.Errorf("%s: %s = %v, want 1", tc.name, stockotel.MetricOrders, got)
		}
	}
	if got := r.sum(stockotel.MetricUnitsTaken,
		attribute.String(stockotel.AttrStrategy, "mem"),
		attribute.String(stockotel.AttrOperation, stockotel.OpHold)); got != 2 {
		t.Errorf("units held = %v, want 2", got)
	}
}

// failing returns a fixed error from every call and counts retries and
// batches the way strategies do.
type failing struct {
	stockguard.Inventory
	err error
}

func (f failing) Decrement(context.Context, string, int64) error { return f.err }
func (f failing) Retries() int64                                 { return 7 }

type stats struct{ Batches, Requests int64 }

func (f failing) Stats() stats { return stats{Batches: 3, Requests: 12} }

func TestWrap_failuresAndObservers(t *testing.T) {
	ctx := t.Context()
	r := newRecorder()
	unknown := fmt.Errorf("reply lost: %w", stockguard.ErrOutcomeUnknown)
	inv := stockotel.Wrap(failing{Inventory: memorders.New(), err: unknown},
		stockotel.WithMeterProvider(r), stockotel.WithTracerProvider(r), stockotel.WithStrategy("mem"))
	if err := inv.Decrement(ctx, "s", 1); !errors.Is(err, stockguard.ErrOutcomeUnknown) {
		t.Fatalf("Decrement = %v, want the inner error", err)
	}
	plain := []attribute.KeyValue{
		attribute.String(stockotel.AttrStrategy, "mem"),
		attribute.String(stockotel.AttrOperation, stockotel.OpDecrement),
	}
	if got := r.sum(stockotel.MetricOutcomeUnknown, plain...); got != 1 {
		t.Errorf("unknown outcomes = %v, want 1", got)
	}
	if got := r.sum(stockotel.MetricUnitsTaken, plain...); got != 0 {
		t.Errorf("units taken = %v, want 0 for a failed call", got)
	}
	s := r.spans[len(r.spans)-1]
	if s.status != codes.Error || s.attrs[stockotel.AttrErrorType].AsString() != stockotel.OutcomeOutcomeUnknown {
		t.Errorf("span status %v error.type %v, want Error outcome_unknown", s.status, s.attrs[stockotel.AttrErrorType])
	}

	r.collect()
	strategy := attribute.String(stockotel.AttrStrategy, "mem")
	for name, want := range map[string]float64{
		stockotel.MetricRetries: 7, stockotel.MetricBatches: 3, stockotel.MetricBatchRequests: 12,
	} {
		if got := r.sum(name, strategy); got != want {
			t.Errorf("%s = %v, want %v", name, got, want)
		}
	}
}

// A sold-out answer is a span attribute, not a span error: a flash sale
// answers no to most buyers and is not failing.
func TestWrap_soldOutIsNotSpanError(t *testing.T) {
	r := newRecorder()
	inv := wrapped(r, memorders.New())
	_ = inv.SetStock(t.Context(), "s", 0)
	if err := inv.Decrement(t.Context(), "s", 1); !errors.Is(err, stockguard.ErrInsufficientStock) {
		t.Fatal(err)
	}
	s := r.spans[len(r.spans)-1]
	if s.status == codes.Error || s.attrs[stockotel.AttrErrorType].AsString() != stockotel.OutcomeInsufficientStock {
		t.Errorf("span status %v error.type %v", s.status, s.attrs[stockotel.AttrErrorType])
	}
}

// countingInventory counts the calls that reach it.
type countingInventory struct {
	stockguard.Inventory
	calls atomic.Int64
}

func (c *countingInventory) Decrement(ctx context.Context, sku string, qty int64) error {
	c.calls.Add(1)
	return c.Inventory.Decrement(ctx, sku, qty)
}

func TestWrap_badOptions(t *testing.T) {
	for _, tc := range []struct {
		name string
		opt  stockotel.Option
	}{
		{"nil meter provider", stockotel.WithMeterProvider(nil)},
		{"nil tracer provider", stockotel.WithTracerProvider(nil)},
		{"empty strategy", stockotel.WithStrategy("")},
		{"nil option", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			inner := &countingInventory{Inventory: memorders.New()}
			inv := stockotel.Wrap(inner, tc.opt)
			if err := inv.Decrement(t.Context(), "s", 1); !errors.Is(err, stockguard.ErrInvalidRequest) {
				t.Errorf("Decrement = %v, want ErrInvalidRequest", err)
			}
			if err := inv.SetStock(t.Context(), "s", 1); !errors.Is(err, stockguard.ErrInvalidRequest) {
				t.Errorf("SetStock = %v, want ErrInvalidRequest", err)
			}
			if _, err := inv.Stock(t.Context(), "s"); !errors.Is(err, stockguard.ErrInvalidRequest) {
				t.Errorf("Stock = %v, want ErrInvalidRequest", err)
			}
			if inner.calls.Load() != 0 {
				t.Error("a bad option let a call through")
			}
		})
	}
}

// A nil context reaches the strategy, which refuses it; the wrapper does
// not panic starting a span from it.
func TestWrap_nilContext(t *testing.T) {
	r := newRecorder()
	inv := wrapped(r, memorders.New())
	//lint:ignore SA1012 the nil context is the case under test
	if err := inv.Decrement(nil, "s", 1); !errors.Is(err, stockguard.ErrInvalidRequest) {
		t.Errorf("Decrement(nil ctx) = %v, want ErrInvalidRequest", err)
	}
}

func TestOutcome_everyContractErrorHasItsOwnName(t *testing.T) {
	seen := map[string]error{}
	for _, e := range sgstrategy.ContractErrors() {
		name := stockotel.Outcome(fmt.Errorf("wrapped: %w", e))
		if name == stockotel.OutcomeOther || name == stockotel.OutcomeOK {
			t.Errorf("%v → %q", e, name)
		}
		if prev, dup := seen[name]; dup {
			t.Errorf("%v and %v share %q", prev, e, name)
		}
		seen[name] = e
	}
	if got := stockotel.Outcome(errors.New("boom")); got != stockotel.OutcomeOther {
		t.Errorf("non-contract error → %q", got)
	}
	if got := stockotel.Outcome(nil); got != stockotel.OutcomeOK {
		t.Errorf("nil → %q", got)
	}
}
