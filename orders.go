package stockguard

import (
	"context"
	"fmt"
	"time"
)

// Limits of an order.
const (
	// MaxIDLen is the longest order ID in bytes.
	MaxIDLen = 128
	// MaxLines is the most lines one order may have.
	MaxLines = 64
	// MinHoldTTL and MaxHoldTTL bound how long a hold may last.
	MinHoldTTL = time.Millisecond
	MaxHoldTTL = 7 * 24 * time.Hour
)

// Line is one SKU of an order and the units it takes.
type Line struct {
	SKU string
	Qty int64
}

// OrderState is where an order stands.
type OrderState int

// The states of an order.
const (
	OrderHeld     OrderState = iota + 1 // taken until Confirm, Return or the deadline
	OrderTaken                          // taken for good (Take, or a confirmed hold)
	OrderReturned                       // given back by Return
	OrderExpired                        // a hold whose deadline passed; its units went back
)

func (s OrderState) String() string {
	switch s {
	case OrderHeld:
		return "held"
	case OrderTaken:
		return "taken"
	case OrderReturned:
		return "returned"
	case OrderExpired:
		return "expired"
	}
	return fmt.Sprintf("OrderState(%d)", int(s))
}

// Open reports whether an order in state s still has its units: held or taken.
func (s OrderState) Open() bool { return s == OrderHeld || s == OrderTaken }

// OrderInfo is what Orders.Order reports of one order.
type OrderInfo struct {
	ID       string
	State    OrderState
	Lines    []Line    // in SKU order
	Deadline time.Time // holds only: when an unconfirmed hold expires (backend clock); zero once taken
}

// Orders is an Inventory that takes whole orders under caller-chosen IDs and
// remembers them, so that every call can be retried with exactly-once effect.
//
// Every method returns nil or an error satisfying errors.Is for exactly one
// of the contract errors. A call that returned
// ErrOutcomeUnknown, repeated with the same arguments, ends in the state one
// successful call would have left.
//
// Besides the errors each method names, every method may return:
// ErrInvalidRequest (bad arguments or options, before any I/O: nothing
// changed), ErrContention (the backend stayed busy: nothing changed),
// ErrUnavailable (the backend could not serve: nothing changed), or the
// context's error (it ended before anything was sent, or while waiting:
// nothing changed). Take, Hold, Confirm, Return and Restock may also return
// ErrOutcomeUnknown (repeat the call); Order and Stock never do.
//
// Units out on open orders (held or taken) count against MaxQty with the
// level: SetStock and Restock refuse, with ErrInvalidRequest, a level that
// would leave them no room to come back, so a Return is never refused.
type Orders interface {
	Inventory
	// Take takes every line, or none, for good under id. A retry with the
	// same lines of an order held or taken is nil and takes nothing again;
	// of a returned or expired one, ErrOrderClosed; with other lines, of a
	// hold, or of an id Restock applied, ErrOrderMismatch.
	// ErrInsufficientStock and ErrUnknownSKU record nothing: a later call
	// with id tries afresh.
	Take(ctx context.Context, id string, lines ...Line) error
	// Hold takes every line, or none, until Confirm, Return, or ttl has
	// passed by the backend's clock; then the units are back at once, with
	// no sweeper running. Its errors and retries are Take's (a retry of a
	// take is ErrOrderMismatch).
	Hold(ctx context.Context, id string, ttl time.Duration, lines ...Line) error
	// Confirm makes a hold taken for good: nil for a hold before its
	// deadline or an order already taken, ErrOrderClosed for one returned or
	// expired, ErrUnknownOrder when nothing was applied under id,
	// ErrOrderMismatch when Restock applied it.
	Confirm(ctx context.Context, id string) error
	// Return gives an order's units back, exactly once: nil for an order
	// held, taken, returned or expired; ErrUnknownOrder when nothing was
	// applied under id; ErrOrderMismatch when Restock applied it. It is
	// never refused for want of room: see MaxQty above.
	Return(ctx context.Context, id string) error
	// Restock adds qty units to a stocked sku, once per id: a retry is nil
	// and adds nothing; ErrUnknownSKU for a SKU never stocked (nothing
	// recorded); ErrOrderMismatch when id was applied otherwise — by Take
	// or Hold, or by a Restock of another SKU or qty; ErrInvalidRequest
	// when the level plus the units out on open orders plus qty would pass
	// MaxQty (nothing recorded).
	Restock(ctx context.Context, id string, sku string, qty int64) error
	// Order reports the order applied under id: ErrUnknownOrder when
	// nothing was, ErrOrderMismatch when Restock applied it (a restock is
	// no order).
	Order(ctx context.Context, id string) (OrderInfo, error)
}
