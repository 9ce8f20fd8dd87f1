package stockguard

import (
	"errors"
	"fmt"
)

// The contract errors. Strategies wrap them with %w; compare with errors.Is.
var (
	// ErrInsufficientStock: fewer than qty units are left. Nothing changed.
	ErrInsufficientStock = errors.New("stockguard: insufficient stock")
	// ErrUnknownSKU: the SKU was never stocked. Nothing changed, nothing was created.
	ErrUnknownSKU = errors.New("stockguard: unknown sku")
	// ErrInvalidRequest: a bad sku, qty, stock level, order ID, line, TTL,
	// option or a nil context, rejected before any I/O. Nothing changed.
	ErrInvalidRequest = errors.New("stockguard: invalid request")
	// ErrContention: the strategy gave up because the stock was busy
	// (retries exhausted, lock not obtained, row busy). Nothing changed; the
	// caller may try again.
	ErrContention = errors.New("stockguard: contention, gave up")
	// ErrOutcomeUnknown: the request may or may not have been applied, because
	// the connection failed or timed out after it was sent. The caller must
	// reconcile, or retry only if its retries are idempotent (Orders).
	ErrOutcomeUnknown = errors.New("stockguard: outcome unknown")
	// ErrUnavailable: the backend could not serve the request — unreachable,
	// a missing table, read-only — and nothing was applied. Unlike
	// ErrContention it does not mean "busy": trying again at once rarely helps.
	ErrUnavailable = errors.New("stockguard: backend unavailable")
	// ErrUnknownOrder: no order was applied under that ID. Nothing changed.
	ErrUnknownOrder = errors.New("stockguard: unknown order")
	// ErrOrderMismatch: the ID was applied with other lines, another SKU or
	// qty, or as the other kind of call. Nothing changed.
	ErrOrderMismatch = errors.New("stockguard: order mismatch")
	// ErrOrderClosed: the order was returned, or its hold expired. Nothing
	// changed.
	ErrOrderClosed = errors.New("stockguard: order closed")
)

// ErrFenced is returned by a fenced store's write when the stock was already
// written under a newer lock token: the caller's lock expired and someone
// else has held it since. Nothing was changed. It wraps ErrContention, the
// contract error a strategy reports for it.
var ErrFenced = fmt.Errorf("stockguard: write fenced off by a newer lock holder: %w", ErrContention)

// ErrCorruptStock is wrapped, together with ErrUnknownSKU, by the errors of
// a SKU whose stored stock holds something stockguard did not write (a Redis
// key that is not a string, or not the canonical decimal of 0…MaxQty).
// Nothing was changed; SetStock overwrites the value.
var ErrCorruptStock = errors.New("stockguard: stock key holds no valid stock level")
