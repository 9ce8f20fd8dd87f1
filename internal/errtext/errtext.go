// Package errtext words a strategy's errors the one way the contract asks:
// the text of the contract error first, the same on every backend, then
// the detail. The conditions a request can meet on any backend (too little
// stock, an unknown SKU or order, a closed or mismatched order) have one
// detail each, built here, so that a caller sees the same text whichever
// strategy answered:
//
//	stockguard: insufficient stock: "hot-sku" has 10, 11 wanted
//	stockguard: insufficient stock: "hot-sku" has fewer than the 11 wanted
//	stockguard: unknown sku: "hot-sku"
//	stockguard: unknown order: "order-1"
//	stockguard: order closed: "order-1" is returned
//	stockguard: order mismatch: "order-1" was applied by Restock
//	stockguard: order mismatch: "order-1" was applied by another call
//
// Other errors carry where they happened and the backend's detail after
// the contract error's text (Wrap).
package errtext

import (
	"errors"
	"fmt"
	"strings"

	"github.com/stockguard/stockguard"
	"github.com/stockguard/stockguard/strategy"
)

// Unknown stands for a stock level the strategy did not read: a script
// that refuses a take without returning the level.
const Unknown int64 = -1

// Insufficient is stockguard.ErrInsufficientStock for want units of sku
// when have were left, or, when have is Unknown, when fewer than want were.
func Insufficient(sku string, have, want int64) error {
	if have < 0 {
		return condition(stockguard.ErrInsufficientStock, "%q has fewer than the %d wanted", sku, want)
	}
	return condition(stockguard.ErrInsufficientStock, "%q has %d, %d wanted", sku, have, want)
}

// UnknownSKU is stockguard.ErrUnknownSKU for sku.
func UnknownSKU(sku string) error {
	return condition(stockguard.ErrUnknownSKU, "%q", sku)
}

// UnknownOrder is stockguard.ErrUnknownOrder for the order ID id.
func UnknownOrder(id string) error {
	return condition(stockguard.ErrUnknownOrder, "%q", id)
}

// Closed is stockguard.ErrOrderClosed for the order id, now in state.
func Closed(id string, state stockguard.OrderState) error {
	return condition(stockguard.ErrOrderClosed, "%q is %v", id, state)
}

// Mismatch is stockguard.ErrOrderMismatch for the order ID id, applied by
// the call named by (Take, Hold, Restock) with other lines, or as another
// kind of call. An empty by says the strategy does not know which call.
func Mismatch(id, by string) error {
	if by == "" {
		by = "another call"
	}
	return condition(stockguard.ErrOrderMismatch, "%q was applied by %s", id, by)
}

// detailed is an error built by the functions above: its text is final.
type detailed struct {
	text string
	err  error
}

func condition(sentinel error, format string, args ...any) error {
	return &detailed{text: sentinel.Error() + ": " + fmt.Sprintf(format, args...), err: sentinel}
}

func (d *detailed) Error() string { return d.text }
func (d *detailed) Unwrap() error { return d.err }

// Wrap returns err with where (format and args) put after its contract
// error's text; errors.Is and errors.As see through it to err. An error
// outside the contract, or one whose text does not start with its
// contract error's, gets where in front, as fmt.Errorf("%s: %w") would.
// An error built by Insufficient, UnknownSKU, UnknownOrder, Closed or
// Mismatch is returned as it is: its detail already names the SKU or
// order, and its text is the same on every backend.
func Wrap(err error, format string, args ...any) error {
	if err == nil {
		return nil
	}
	var d *detailed
	if errors.As(err, &d) && strings.HasPrefix(err.Error(), d.text) {
		return err
	}
	where := fmt.Sprintf(format, args...)
	c := strategy.Contract(err)
	if c == nil {
		return fmt.Errorf("%s: %w", where, err)
	}
	head := c.Error()
	if errors.Is(err, stockguard.ErrFenced) {
		head = stockguard.ErrFenced.Error()
	}
	rest, ok := strings.CutPrefix(err.Error(), head)
	if !ok {
		return fmt.Errorf("%s: %w", where, err)
	}
	return &wrapped{text: head + ": " + where + rest, err: err}
}

type wrapped struct {
	text string
	err  error
}

func (w *wrapped) Error() string { return w.text }
func (w *wrapped) Unwrap() error { return w.err }
