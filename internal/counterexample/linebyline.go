package counterexample

import (
	"context"
	"time"

	"github.com/stockguard/stockguard"
)

// LineByLine is a checkout client that takes a cart one line at a time,
// each line an exactly-once order of its own, and gives up at the first
// line the store refuses.
//
// How it breaks: a cart whose later line is short is refused, but its
// earlier lines stay taken — nobody undoes them. The buyer was told no, the
// units are gone: the audit reports them lost.
type LineByLine struct {
	inner stockguard.Orders
}

var _ stockguard.Orders = (*LineByLine)(nil)

// NewLineByLine wraps inner.
func NewLineByLine(inner stockguard.Orders) *LineByLine { return &LineByLine{inner: inner} }

func (c *LineByLine) each(ctx context.Context, id string, lines []stockguard.Line, call func(ctx context.Context, id string, l stockguard.Line) error) error {
	if err := stockguard.ValidateTake(id, lines); err != nil {
		return err
	}
	for n, l := range lines {
		if err := call(ctx, partID(id, n), l); err != nil {
			return err // the bug: the lines before stay taken
		}
	}
	return nil
}

// Take takes the lines one by one.
func (c *LineByLine) Take(ctx context.Context, id string, lines ...stockguard.Line) error {
	return c.each(ctx, id, lines, func(ctx context.Context, pid string, l stockguard.Line) error { return c.inner.Take(ctx, pid, l) })
}

// Hold holds the lines one by one.
func (c *LineByLine) Hold(ctx context.Context, id string, ttl time.Duration, lines ...stockguard.Line) error {
	return c.each(ctx, id, lines, func(ctx context.Context, pid string, l stockguard.Line) error { return c.inner.Hold(ctx, pid, ttl, l) })
}

// Confirm confirms every line of id.
func (c *LineByLine) Confirm(ctx context.Context, id string) error {
	return eachPart(ctx, c.inner, id, c.inner.Confirm)
}

// Return returns every line of id.
func (c *LineByLine) Return(ctx context.Context, id string) error {
	return eachPart(ctx, c.inner, id, c.inner.Return)
}

// Order reports the lines of id merged.
func (c *LineByLine) Order(ctx context.Context, id string) (stockguard.OrderInfo, error) {
	return merged(ctx, c.inner, id)
}

// Restock is the inner store's.
func (c *LineByLine) Restock(ctx context.Context, id, sku string, qty int64) error {
	return c.inner.Restock(ctx, id, sku, qty)
}

// Decrement is the inner store's.
func (c *LineByLine) Decrement(ctx context.Context, sku string, qty int64) error {
	return c.inner.Decrement(ctx, sku, qty)
}

// SetStock is the inner store's.
func (c *LineByLine) SetStock(ctx context.Context, sku string, qty int64) error {
	return c.inner.SetStock(ctx, sku, qty)
}

// Stock is the inner store's.
func (c *LineByLine) Stock(ctx context.Context, sku string) (int64, error) {
	return c.inner.Stock(ctx, sku)
}
