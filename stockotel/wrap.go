package stockotel

import (
	"context"
	"errors"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/stockguard/stockguard"
	"github.com/stockguard/stockguard/strategy"
)

var (
	_ stockguard.Inventory = (*Inventory)(nil)
	_ stockguard.Orders    = (*Orders)(nil)
)

// Inventory is a stockguard.Inventory whose calls are measured and traced.
type Inventory struct {
	inner    stockguard.Inventory
	ins      *instruments
	tracer   trace.Tracer
	strategy attribute.KeyValue
	err      error // a bad option, returned by every method
}

// Orders is a stockguard.Orders whose calls are measured and traced.
type Orders struct {
	Inventory
	orders stockguard.Orders
}

// Wrap returns inv measured and traced (see the package doc). Wrap each
// strategy once, at start-up: its observers live as long as the
// MeterProvider.
func Wrap(inv stockguard.Inventory, opts ...Option) *Inventory {
	o := newOptions(inv, opts)
	w := &Inventory{inner: inv, err: o.err, strategy: attribute.String(AttrStrategy, o.strategy)}
	if o.err != nil {
		return w
	}
	meter := o.meters.Meter(ScopeName)
	w.ins = newInstruments(meter)
	w.tracer = o.tracers.Tracer(ScopeName)
	observe(meter, inv, w.strategy)
	return w
}

// WrapOrders is Wrap for an Orders: every order call is measured too.
func WrapOrders(o stockguard.Orders, opts ...Option) *Orders {
	return &Orders{Inventory: *Wrap(o, opts...), orders: o}
}

// Unwrap returns the wrapped inventory, for type assertions on the
// strategy's own methods.
func (w *Inventory) Unwrap() stockguard.Inventory { return w.inner }

// call describes one measured call; the function may set state from what
// it learned (Order).
type call struct {
	op    string
	order bool  // an order call: counted in MetricOrders
	units int64 // units taken on success
	// applied: a call that ended ErrOutcomeUnknown was found applied, so
	// its units count (see Orders.Take).
	applied bool
	state   string // order state after success
	attrs   []attribute.KeyValue
}

// do runs fn in a span and records its outcome. A nil ctx is passed to fn
// as it is, so the strategy reports it, while the span starts from an
// empty context.
func (w *Inventory) do(ctx context.Context, c *call, fn func(ctx context.Context) error) error {
	if w.err != nil {
		return w.err
	}
	parent := ctx
	if parent == nil {
		parent = context.Background()
	}
	attrs := append(c.attrs, w.strategy, attribute.String(AttrOperation, c.op))
	spanCtx, span := w.tracer.Start(parent, SpanPrefix+spanName(c.op),
		trace.WithSpanKind(trace.SpanKindInternal), trace.WithAttributes(attrs...))
	if ctx != nil {
		ctx = spanCtx
	}
	began := time.Now()
	err := fn(ctx)
	elapsed := time.Since(began).Seconds()
	outcome := Outcome(err)
	defer span.End()
	if err != nil {
		span.SetAttributes(attribute.String(AttrErrorType, outcome))
		if failure(outcome) {
			span.RecordError(err)
			span.SetStatus(codes.Error, err.Error())
		}
	}
	// The context is for metric exemplars; an ended one must not drop them.
	mctx := context.WithoutCancel(spanCtx)
	measured := metric.WithAttributes(w.strategy,
		attribute.String(AttrOperation, c.op), attribute.String(AttrOutcome, outcome))
	w.ins.operations.Add(mctx, 1, measured)
	w.ins.duration.Record(mctx, elapsed, measured)
	plain := metric.WithAttributes(w.strategy, attribute.String(AttrOperation, c.op))
	if c.units > 0 && (err == nil || c.applied) {
		w.ins.units.Add(mctx, c.units, plain)
	}
	if outcome == OutcomeOutcomeUnknown {
		w.ins.unknown.Add(mctx, 1, plain)
	}
	if c.order {
		orderAttrs := []attribute.KeyValue{w.strategy,
			attribute.String(AttrOperation, c.op), attribute.String(AttrOutcome, outcome)}
		if err == nil && c.state != "" {
			orderAttrs = append(orderAttrs, attribute.String(AttrOrderState, c.state))
			span.SetAttributes(attribute.String(AttrOrderState, c.state))
		}
		w.ins.orders.Add(mctx, 1, metric.WithAttributes(orderAttrs...))
	}
	return err
}

func spanName(op string) string {
	switch op {
	case OpDecrement:
		return "Decrement"
	case OpSetStock:
		return "SetStock"
	case OpStock:
		return "Stock"
	case OpTake:
		return "Take"
	case OpHold:
		return "Hold"
	case OpConfirm:
		return "Confirm"
	case OpReturn:
		return "Return"
	case OpRestock:
		return "Restock"
	}
	return "Order"
}

// Decrement calls the wrapped Decrement; it returns that call's error, or
// an error wrapping stockguard.ErrInvalidRequest for a bad option.
func (w *Inventory) Decrement(ctx context.Context, sku string, qty int64) error {
	c := &call{op: OpDecrement, units: qty, attrs: skuAttrs(sku, qty)}
	return w.do(ctx, c, func(ctx context.Context) error { return w.inner.Decrement(ctx, sku, qty) })
}

// SetStock calls the wrapped SetStock; errors as for Decrement.
func (w *Inventory) SetStock(ctx context.Context, sku string, qty int64) error {
	c := &call{op: OpSetStock, attrs: skuAttrs(sku, qty)}
	return w.do(ctx, c, func(ctx context.Context) error { return w.inner.SetStock(ctx, sku, qty) })
}

// Stock calls the wrapped Stock; errors as for Decrement.
func (w *Inventory) Stock(ctx context.Context, sku string) (int64, error) {
	var n int64
	c := &call{op: OpStock, attrs: []attribute.KeyValue{attribute.String(AttrSKU, sku)}}
	err := w.do(ctx, c, func(ctx context.Context) error {
		var err error
		n, err = w.inner.Stock(ctx, sku)
		return err
	})
	return n, err
}

// Take calls the wrapped Take; errors as for Decrement. Its units are
// counted once per order, however often the call is repeated (see
// countOnce).
func (o *Orders) Take(ctx context.Context, id string, lines ...stockguard.Line) error {
	c := &call{op: OpTake, order: true, state: stockguard.OrderTaken.String(), attrs: orderAttrs(id, lines)}
	return o.do(ctx, c, func(ctx context.Context) error {
		return o.countOnce(ctx, c, id, lines, strategy.ValidateTake(id, lines), func() error { return o.orders.Take(ctx, id, lines...) })
	})
}

// Hold calls the wrapped Hold; errors and units as for Take.
func (o *Orders) Hold(ctx context.Context, id string, ttl time.Duration, lines ...stockguard.Line) error {
	c := &call{op: OpHold, order: true, state: stockguard.OrderHeld.String(), attrs: orderAttrs(id, lines)}
	return o.do(ctx, c, func(ctx context.Context) error {
		return o.countOnce(ctx, c, id, lines, strategy.ValidateHold(id, ttl, lines), func() error { return o.orders.Hold(ctx, id, ttl, lines...) })
	})
}

// reconcileTimeout bounds the read that settles whether a Take or Hold
// that ended stockguard.ErrOutcomeUnknown was applied.
const reconcileTimeout = time.Second

// countOnce runs a Take or Hold and sets c.units to the order's units only
// when this call is the one that applied the order, so that
// MetricUnitsTaken is exactly-once like the orders: a retry answered nil
// without taking again counts nothing.
//
// A nil answer is the same for the first call and for a repeat, so the
// wrapper asks the store, which already knows, rather than keep a second
// record of IDs: it reads the order before the call (one more round trip
// per Take and Hold). Absent before and nil after, this call applied it.
// Absent before and ErrOutcomeUnknown after, it reads the order again: if
// it is there now, this call applied it and its units count now, so the
// retry that follows (which finds the order) counts nothing. The read is
// skipped for a request the strategy refuses before any I/O.
//
// Two gaps: two calls with one new ID in flight at once both find it absent
// and both count (a retry normally follows the answer it retries); and when
// a read fails, the call's units are not counted (MetricOutcomeUnknown
// still shows an unknown call).
func (o *Orders) countOnce(ctx context.Context, c *call, id string, lines []stockguard.Line, invalid error, write func() error) error {
	if ctx == nil || invalid != nil {
		return write()
	}
	_, err := o.orders.Order(ctx, id)
	fresh := errors.Is(err, stockguard.ErrUnknownOrder)
	err = write()
	switch {
	case !fresh:
	case err == nil:
		c.units = units(lines)
	case errors.Is(err, stockguard.ErrOutcomeUnknown):
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), reconcileTimeout)
		defer cancel()
		if _, rerr := o.orders.Order(rctx, id); rerr == nil {
			c.units, c.applied = units(lines), true
		}
	}
	return err
}

// Confirm calls the wrapped Confirm; errors as for Decrement.
func (o *Orders) Confirm(ctx context.Context, id string) error {
	c := &call{op: OpConfirm, order: true, state: stockguard.OrderTaken.String(), attrs: orderAttrs(id, nil)}
	return o.do(ctx, c, func(ctx context.Context) error { return o.orders.Confirm(ctx, id) })
}

// Return calls the wrapped Return; errors as for Decrement. A nil Return
// is counted with state returned, also for a hold that had expired.
func (o *Orders) Return(ctx context.Context, id string) error {
	c := &call{op: OpReturn, order: true, state: stockguard.OrderReturned.String(), attrs: orderAttrs(id, nil)}
	return o.do(ctx, c, func(ctx context.Context) error { return o.orders.Return(ctx, id) })
}

// Restock calls the wrapped Restock; errors as for Decrement.
func (o *Orders) Restock(ctx context.Context, id string, sku string, qty int64) error {
	c := &call{op: OpRestock, order: true, attrs: append(orderAttrs(id, nil), skuAttrs(sku, qty)...)}
	return o.do(ctx, c, func(ctx context.Context) error { return o.orders.Restock(ctx, id, sku, qty) })
}

// Order calls the wrapped Order, counting the state it reports; errors as
// for Decrement.
func (o *Orders) Order(ctx context.Context, id string) (stockguard.OrderInfo, error) {
	var info stockguard.OrderInfo
	c := &call{op: OpOrder, order: true, attrs: orderAttrs(id, nil)}
	err := o.do(ctx, c, func(ctx context.Context) error {
		var err error
		info, err = o.orders.Order(ctx, id)
		if err == nil {
			c.state = info.State.String()
		}
		return err
	})
	return info, err
}

func skuAttrs(sku string, qty int64) []attribute.KeyValue {
	return []attribute.KeyValue{attribute.String(AttrSKU, sku), attribute.Int64(AttrQty, qty)}
}

// orderAttrs are an order's span attributes: its ID, its line count, and
// the SKU and qty when it has one line (the common checkout).
func orderAttrs(id string, lines []stockguard.Line) []attribute.KeyValue {
	attrs := []attribute.KeyValue{attribute.String(AttrOrderID, id)}
	if lines != nil {
		attrs = append(attrs, attribute.Int(AttrLineCount, len(lines)))
	}
	if len(lines) == 1 {
		attrs = append(attrs, skuAttrs(lines[0].SKU, lines[0].Qty)...)
	}
	return attrs
}

// units sums the lines' quantities, saturating so a bad request (which
// the strategy refuses) cannot overflow.
func units(lines []stockguard.Line) int64 {
	var n int64
	for _, l := range lines {
		if l.Qty > 0 && l.Qty <= stockguard.MaxQty && n <= stockguard.MaxQty {
			n += l.Qty
		}
	}
	return n
}
