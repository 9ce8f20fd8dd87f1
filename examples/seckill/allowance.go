package main

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/stockguard/stockguard"
	"github.com/stockguard/stockguard/stockotel"
)

// Every order of a buyer also takes its units from the buyer's allowance
// SKU, in the same all-or-nothing order. The allowance line is the
// service's bookkeeping, not a sale: allowanceOrders adds it beneath the
// instrumentation, so that stockotel's units taken count what the buyers
// bought, once.

// buyerKey is the context key of the buyer an order is placed for.
type buyerKey struct{}

// forBuyer returns ctx carrying buyer, whose allowance the orders placed
// with it take from.
func forBuyer(ctx context.Context, buyer string) context.Context {
	return context.WithValue(ctx, buyerKey{}, buyer)
}

// allowanceOrders is an Orders whose Take and Hold add, to the lines they
// are given, a line of the allowance of the buyer in their context with
// as many units. An order placed without a buyer is refused.
type allowanceOrders struct{ stockguard.Orders }

func (a allowanceOrders) Take(ctx context.Context, id string, lines ...stockguard.Line) error {
	lines, err := withAllowance(ctx, lines)
	if err != nil {
		return err
	}
	return a.Orders.Take(ctx, id, lines...)
}

func (a allowanceOrders) Hold(ctx context.Context, id string, ttl time.Duration, lines ...stockguard.Line) error {
	lines, err := withAllowance(ctx, lines)
	if err != nil {
		return err
	}
	return a.Orders.Hold(ctx, id, ttl, lines...)
}

func withAllowance(ctx context.Context, lines []stockguard.Line) ([]stockguard.Line, error) {
	buyer, ok := ctx.Value(buyerKey{}).(string)
	if !ok {
		return nil, fmt.Errorf("%w: an order without its buyer", stockguard.ErrInvalidRequest)
	}
	var units int64
	for _, l := range lines {
		units += l.Qty
	}
	return append(slices.Clip(lines), stockguard.Line{SKU: allowanceSKU(buyer), Qty: units}), nil
}

// instrument wraps the strategy's inventory as the service calls it:
// measured and traced by stockotel, and, when it keeps orders, with the
// buyers' allowances beneath. orders is nil for the counterexample.
func instrument(inner stockguard.Inventory, opts ...stockotel.Option) (inv stockguard.Inventory, orders stockguard.Orders) {
	if o, ok := inner.(stockguard.Orders); ok {
		wrapped := stockotel.WrapOrders(allowanceOrders{o}, opts...)
		return wrapped, wrapped
	}
	return stockotel.Wrap(inner, opts...), nil
}
