package stockotel_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"

	"github.com/stockguard/stockguard"
	"github.com/stockguard/stockguard/internal/memorders"
	"github.com/stockguard/stockguard/stockotel"
)

// lostReply applies its first Take or Hold and then reports the reply lost,
// as a connection that died after the write was sent.
type lostReply struct {
	stockguard.Orders
	lost bool
}

func (l *lostReply) Take(ctx context.Context, id string, lines ...stockguard.Line) error {
	err := l.Orders.Take(ctx, id, lines...)
	if err == nil && !l.lost {
		l.lost = true
		return fmt.Errorf("reply lost: %w", stockguard.ErrOutcomeUnknown)
	}
	return err
}

func (l *lostReply) Hold(ctx context.Context, id string, ttl time.Duration, lines ...stockguard.Line) error {
	err := l.Orders.Hold(ctx, id, ttl, lines...)
	if err == nil && !l.lost {
		l.lost = true
		return fmt.Errorf("reply lost: %w", stockguard.ErrOutcomeUnknown)
	}
	return err
}

// Units are counted once per order, however often its call is repeated:
// metrics are exactly-once like the orders they count.
func TestWrapOrders_retriedIDCountsUnitsOnce(t *testing.T) {
	line := stockguard.Line{SKU: "s", Qty: 2}
	for _, tc := range []struct {
		name  string
		op    string
		inner func() stockguard.Orders
		call  func(ctx context.Context, o *stockotel.Orders) error
	}{
		{"take repeated", stockotel.OpTake, func() stockguard.Orders { return memorders.New() },
			func(ctx context.Context, o *stockotel.Orders) error { return o.Take(ctx, "o1", line) }},
		{"hold repeated", stockotel.OpHold, func() stockguard.Orders { return memorders.New() },
			func(ctx context.Context, o *stockotel.Orders) error { return o.Hold(ctx, "o1", time.Minute, line) }},
		{"take after a lost reply", stockotel.OpTake, func() stockguard.Orders { return &lostReply{Orders: memorders.New()} },
			func(ctx context.Context, o *stockotel.Orders) error { return o.Take(ctx, "o1", line) }},
		{"hold after a lost reply", stockotel.OpHold, func() stockguard.Orders { return &lostReply{Orders: memorders.New()} },
			func(ctx context.Context, o *stockotel.Orders) error { return o.Hold(ctx, "o1", time.Minute, line) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := t.Context()
			r := newRecorder()
			o := wrapped(r, tc.inner())
			if err := o.SetStock(ctx, "s", 10); err != nil {
				t.Fatal(err)
			}
			var errs []error
			for range 3 {
				errs = append(errs, tc.call(ctx, o))
			}
			if errs[2] != nil {
				t.Fatalf("calls = %v, want the last one nil", errs)
			}
			if left, err := o.Stock(ctx, "s"); err != nil || left != 8 {
				t.Fatalf("Stock = %d, %v; want 8: the store took the units once", left, err)
			}
			got := r.sum(stockotel.MetricUnitsTaken,
				attribute.String(stockotel.AttrStrategy, "mem"), attribute.String(stockotel.AttrOperation, tc.op))
			if got != 2 {
				t.Errorf("%s = %v after calls %v, want 2: the order's units, once", stockotel.MetricUnitsTaken, got, errs)
			}
		})
	}
}
