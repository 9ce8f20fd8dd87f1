package stockguard

import (
	"context"
	"errors"
)

// The contract errors. Strategies wrap them with %w; compare with errors.Is.
var (
	// ErrInsufficientStock: fewer than qty units are left. Nothing changed.
	ErrInsufficientStock = errors.New("stockguard: insufficient stock")
	// ErrUnknownSKU: the SKU was never stocked. Nothing changed, nothing was created.
	ErrUnknownSKU = errors.New("stockguard: unknown sku")
	// ErrInvalidRequest: a bad sku, qty or stock level, rejected before any I/O.
	ErrInvalidRequest = errors.New("stockguard: invalid request")
	// ErrContention: the strategy gave up (retries exhausted, lock not obtained,
	// row busy). Nothing changed; the caller may try again.
	ErrContention = errors.New("stockguard: contention, gave up")
	// ErrOutcomeUnknown: the request may or may not have been applied, because
	// the connection failed or timed out after it was sent. The caller must
	// reconcile, or retry only if its retries are idempotent.
	ErrOutcomeUnknown = errors.New("stockguard: outcome unknown")
)

// Canceled returns nil while ctx is live, else ctx.Err() joined with its cause
// when the cause says more. Strategies call it before sending anything, so an
// ended context is reported as the context's own error: nothing was applied.
func Canceled(ctx context.Context) error {
	err := ctx.Err()
	if err == nil {
		return nil
	}
	if cause := context.Cause(ctx); cause != nil && cause != err {
		return errors.Join(err, cause)
	}
	return err
}

// IsContract reports whether err is one of the errors a Decrementer may
// return: a contract sentinel or a context error.
func IsContract(err error) bool {
	for _, target := range []error{
		ErrInsufficientStock, ErrUnknownSKU, ErrInvalidRequest, ErrContention, ErrOutcomeUnknown,
		context.Canceled, context.DeadlineExceeded,
	} {
		if errors.Is(err, target) {
			return true
		}
	}
	return false
}
