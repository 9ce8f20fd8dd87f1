package stockguard

import "context"

// MaxQty is the largest quantity and stock level stockguard accepts. Redis Lua
// numbers are IEEE doubles, which hold every integer up to 2^53 exactly; above
// that a Lua comparison could round and let a decrement go below zero.
const MaxQty = 1<<53 - 1

// MaxSKULen is the longest SKU in bytes. It matches the stock table's
// VARBINARY(64) primary key, so a SKU that validates always fits the row.
const MaxSKULen = 64

// Decrementer takes qty units of sku: all of them or none.
//
// Implementations return nil on success, or an error that satisfies errors.Is
// for exactly one of the contract errors: for a Decrement,
// ErrInsufficientStock, ErrUnknownSKU, ErrInvalidRequest, ErrContention,
// ErrUnavailable, ErrOutcomeUnknown, context.Canceled or
// context.DeadlineExceeded.
type Decrementer interface {
	Decrement(ctx context.Context, sku string, qty int64) error
}

// Inventory is a Decrementer that can also be stocked and read.
type Inventory interface {
	Decrementer
	// SetStock creates sku with qty units, or overwrites its stock level.
	SetStock(ctx context.Context, sku string, qty int64) error
	// Stock returns the units of sku left, or ErrUnknownSKU.
	Stock(ctx context.Context, sku string) (int64, error)
}
