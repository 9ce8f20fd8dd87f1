package stockguard

import (
	"context"
	"fmt"
	"unicode"
	"unicode/utf8"
)

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
// for exactly one of the contract errors (ContractErrors): for a Decrement,
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

// RetryCounter is implemented by strategies that retry internally (optimistic
// concurrency, lock acquisition). The harness reads it to report retries per
// operation.
type RetryCounter interface {
	// Retries returns the number of retries since the strategy was created.
	Retries() int64
}

// ValidateSKU reports whether sku is 1–MaxSKULen bytes of valid UTF-8 with no
// control characters. It returns nil or an error wrapping ErrInvalidRequest.
func ValidateSKU(sku string) error { return validText("sku", sku, MaxSKULen) }

// validText checks that s, the request's what, is 1–limit bytes of valid
// UTF-8 with no control characters: what fits the store's binary key and
// prints safely in an error.
func validText(what, s string, limit int) error {
	switch {
	case s == "":
		return fmt.Errorf("%w: empty %s", ErrInvalidRequest, what)
	case len(s) > limit:
		return fmt.Errorf("%w: %s is %d bytes, at most %d allowed", ErrInvalidRequest, what, len(s), limit)
	case !utf8.ValidString(s):
		return fmt.Errorf("%w: %s %q is not valid UTF-8", ErrInvalidRequest, what, s)
	}
	for _, r := range s {
		if unicode.IsControl(r) {
			return fmt.Errorf("%w: %s %q contains control character %U", ErrInvalidRequest, what, s, r)
		}
	}
	return nil
}

// ValidateQty reports whether qty is a quantity that can be taken: 1…MaxQty.
// It returns nil or an error wrapping ErrInvalidRequest.
func ValidateQty(qty int64) error {
	if qty < 1 || qty > MaxQty {
		return fmt.Errorf("%w: qty %d outside 1…%d", ErrInvalidRequest, qty, int64(MaxQty))
	}
	return nil
}

// ValidateLevel reports whether qty is a stock level that can be set:
// 0…MaxQty. It returns nil or an error wrapping ErrInvalidRequest.
func ValidateLevel(qty int64) error {
	if qty < 0 || qty > MaxQty {
		return fmt.Errorf("%w: stock level %d outside 0…%d", ErrInvalidRequest, qty, int64(MaxQty))
	}
	return nil
}

// ValidateSet checks a SetStock request: ValidateSKU, then ValidateLevel.
// Strategies call it before any I/O.
func ValidateSet(sku string, qty int64) error {
	if err := ValidateSKU(sku); err != nil {
		return err
	}
	return ValidateLevel(qty)
}

// Validate checks a Decrement request: ValidateSKU, then ValidateQty.
// Strategies call it before any I/O.
func Validate(sku string, qty int64) error {
	if err := ValidateSKU(sku); err != nil {
		return err
	}
	return ValidateQty(qty)
}
