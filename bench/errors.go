package bench

import (
	"context"
	"errors"

	"github.com/stockguard/stockguard"
)

// Kind classifies the outcome of one Decrement.
type Kind uint8

// The outcomes, in the order they are tested: an error that is both an
// unknown outcome and a context error (a request sent, then abandoned) is an
// unknown outcome, because its units may have gone.
const (
	KindOK Kind = iota
	KindOutcomeUnknown
	KindInsufficient
	KindUnknownSKU
	KindInvalid
	KindContention
	KindCanceled
	// KindOther is an error outside the contract: a finding in itself.
	KindOther
	numKinds
)

var kindNames = [numKinds]string{
	KindOK:             "ok",
	KindOutcomeUnknown: "outcome-unknown",
	KindInsufficient:   "insufficient",
	KindUnknownSKU:     "unknown-sku",
	KindInvalid:        "invalid",
	KindContention:     "contention",
	KindCanceled:       "canceled",
	KindOther:          "other",
}

// String returns the kind's name as used in reports, e.g. "contention".
func (k Kind) String() string {
	if k < numKinds {
		return kindNames[k]
	}
	return "invalid-kind"
}

// Classify returns the Kind of a Decrement's result.
func Classify(err error) Kind {
	switch {
	case err == nil:
		return KindOK
	case errors.Is(err, stockguard.ErrOutcomeUnknown):
		return KindOutcomeUnknown
	case errors.Is(err, stockguard.ErrInsufficientStock):
		return KindInsufficient
	case errors.Is(err, stockguard.ErrUnknownSKU):
		return KindUnknownSKU
	case errors.Is(err, stockguard.ErrInvalidRequest):
		return KindInvalid
	case errors.Is(err, stockguard.ErrContention):
		return KindContention
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return KindCanceled
	}
	return KindOther
}
