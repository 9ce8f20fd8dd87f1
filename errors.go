package stockguard

import (
	"context"
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

// contractErrors is the one list of the errors a strategy may return. An
// error from a strategy satisfies errors.Is for exactly one of them, in
// this order of precedence: ErrOutcomeUnknown first, because an error that
// says the request may have been applied must never be read as one that
// says nothing was.
var contractErrors = [...]error{
	ErrOutcomeUnknown,
	ErrInsufficientStock,
	ErrUnknownSKU,
	ErrInvalidRequest,
	ErrContention,
	ErrUnavailable,
	ErrUnknownOrder,
	ErrOrderMismatch,
	ErrOrderClosed,
	context.Canceled,
	context.DeadlineExceeded,
}

// ContractErrors returns every error a strategy may return, in order of
// precedence: the sentinels above, then context.Canceled and
// context.DeadlineExceeded.
func ContractErrors() []error {
	out := contractErrors
	return out[:]
}

// Contract returns the contract error err matches, the first in
// ContractErrors' order, or nil when err is nil or outside the contract.
func Contract(err error) error {
	if err == nil {
		return nil
	}
	for _, target := range contractErrors {
		if errors.Is(err, target) {
			return target
		}
	}
	return nil
}

// IsContract reports whether err is one of the errors a strategy may
// return: a contract sentinel or a context error.
func IsContract(err error) bool { return Contract(err) != nil }

// errNilContext is what Canceled reports for a nil context.
var errNilContext = fmt.Errorf("%w: nil context", ErrInvalidRequest)

// Canceled returns nil while ctx is live, else ctx.Err() joined with its
// cause when the cause says more. Strategies call it before sending
// anything, so an ended context is reported as the context's own error:
// nothing was applied. A nil ctx is an error wrapping ErrInvalidRequest.
func Canceled(ctx context.Context) error {
	if ctx == nil {
		return errNilContext
	}
	err := ctx.Err()
	if err == nil {
		return nil
	}
	if cause := context.Cause(ctx); cause != nil && cause != err {
		return errors.Join(err, cause)
	}
	return err
}
