package counterexample

import (
	"context"
	"time"

	"github.com/stockguard/stockguard"
	"github.com/stockguard/stockguard/strategy"
)

// LineByLine is a checkout client that takes a cart one line at a time,
// each line an exactly-once order of its own, and gives up at the first
// line the store refuses.
//
// How it breaks: a cart whose later line is short is refused, but its
// earlier lines stay taken — nobody undoes them. The buyer was told no, the
// units are gone: the audit reports them lost.
type LineByLine struct {
	parted // one record per line
}

var _ stockguard.Orders = (*LineByLine)(nil)

// NewLineByLine wraps inner.
func NewLineByLine(inner stockguard.Orders) *LineByLine { return &LineByLine{parted{inner}} }

func (c *LineByLine) each(ctx context.Context, id string, lines []stockguard.Line, call func(ctx context.Context, id string, l stockguard.Line) error) error {
	if err := strategy.ValidateTake(id, lines); err != nil {
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
	return c.each(ctx, id, lines, func(ctx context.Context, pid string, l stockguard.Line) error { return c.Orders.Take(ctx, pid, l) })
}

// Hold holds the lines one by one.
func (c *LineByLine) Hold(ctx context.Context, id string, ttl time.Duration, lines ...stockguard.Line) error {
	return c.each(ctx, id, lines, func(ctx context.Context, pid string, l stockguard.Line) error { return c.Orders.Hold(ctx, pid, ttl, l) })
}
