package strategy

import (
	"context"
	"errors"

	"github.com/stockguard/stockguard"
)

// contractErrors is the one list of the errors a strategy may return. An
// error from a strategy satisfies errors.Is for exactly one of them, in
// this order of precedence: stockguard.ErrOutcomeUnknown first, because an error that
// says the request may have been applied must never be read as one that
// says nothing was.
var contractErrors = [...]error{
	stockguard.ErrOutcomeUnknown,
	stockguard.ErrInsufficientStock,
	stockguard.ErrUnknownSKU,
	stockguard.ErrInvalidRequest,
	stockguard.ErrContention,
	stockguard.ErrUnavailable,
	stockguard.ErrUnknownOrder,
	stockguard.ErrOrderMismatch,
	stockguard.ErrOrderClosed,
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
