package counterexample

import (
	"context"
	"errors"
	"strconv"

	"github.com/stockguard/stockguard"
	"github.com/stockguard/stockguard/strategy"
)

// The checkout counterexamples wrap a sound stockguard.Orders and break it
// the way application code around a sound store does. Each records one
// order of the caller's as several of the store's, under IDs derived from
// the caller's, as an application's own orders table with no unique key on
// the order number would; Order reports them merged, as a SELECT by order
// number would.

// partID names the n-th record kept for the caller's order id.
func partID(id string, n int) string { return id + "#" + strconv.Itoa(n) }

// parts returns the records kept for id, in the order they were made.
func parts(ctx context.Context, inner stockguard.Orders, id string) ([]stockguard.OrderInfo, error) {
	if err := strategy.ValidateID(id); err != nil {
		return nil, err
	}
	var out []stockguard.OrderInfo
	for n := 0; ; n++ {
		info, err := inner.Order(ctx, partID(id, n))
		switch {
		case errors.Is(err, stockguard.ErrUnknownOrder):
			if len(out) == 0 {
				return nil, err
			}
			return out, nil
		case err != nil:
			return nil, err
		}
		out = append(out, info)
	}
}

// merged reports the records kept for id as one order: the first record's
// state, every record's lines added up per SKU.
func merged(ctx context.Context, inner stockguard.Orders, id string) (stockguard.OrderInfo, error) {
	ps, err := parts(ctx, inner, id)
	if err != nil {
		return stockguard.OrderInfo{}, err
	}
	info := stockguard.OrderInfo{ID: id, State: ps[0].State, Deadline: ps[0].Deadline}
	at := map[string]int{}
	for _, p := range ps {
		for _, l := range p.Lines {
			if i, ok := at[l.SKU]; ok {
				info.Lines[i].Qty += l.Qty
				continue
			}
			at[l.SKU] = len(info.Lines)
			info.Lines = append(info.Lines, l)
		}
	}
	info.Lines = strategy.SortedLines(info.Lines)
	return info, nil
}

// eachPart applies call to every record kept for id, as an UPDATE … WHERE
// order_no = ? would, and returns the first error.
func eachPart(ctx context.Context, inner stockguard.Orders, id string, call func(ctx context.Context, id string) error) error {
	ps, err := parts(ctx, inner, id)
	if err != nil {
		return err
	}
	var first error
	for _, p := range ps {
		if err := call(ctx, p.ID); err != nil && first == nil {
			first = err
		}
	}
	return first
}

// parted is what the checkout clients that keep one order as several
// records of the inner store (partID) share: Confirm, Return and Order
// over every record of an ID; the rest of the contract is the inner
// store's.
type parted struct {
	stockguard.Orders
}

// Confirm confirms every record of id.
func (p parted) Confirm(ctx context.Context, id string) error {
	return eachPart(ctx, p.Orders, id, p.Orders.Confirm)
}

// Return returns every record of id.
func (p parted) Return(ctx context.Context, id string) error {
	return eachPart(ctx, p.Orders, id, p.Orders.Return)
}

// Order reports the records of id merged.
func (p parted) Order(ctx context.Context, id string) (stockguard.OrderInfo, error) {
	return merged(ctx, p.Orders, id)
}
