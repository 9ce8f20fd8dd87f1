package bench

import (
	"context"

	"github.com/stockguard/stockguard"
	"github.com/stockguard/stockguard/strategy"
)

// Kind classifies the outcome of one operation.
type Kind uint8

// The outcomes: one per contract error, in strategy.ContractErrors' order
// of precedence (an error that is both an unknown outcome and a context
// error is an unknown outcome, because its units may have gone).
const (
	KindOK Kind = iota
	KindOutcomeUnknown
	KindInsufficient
	KindUnknownSKU
	KindInvalid
	KindContention
	KindUnavailable
	KindUnknownOrder
	KindOrderMismatch
	KindOrderClosed
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
	KindUnavailable:    "unavailable",
	KindUnknownOrder:   "unknown-order",
	KindOrderMismatch:  "order-mismatch",
	KindOrderClosed:    "order-closed",
	KindCanceled:       "canceled",
	KindOther:          "other",
}

// kindOf maps each contract error to its Kind; the list itself is
// stockguard's.
var kindOf = map[error]Kind{
	stockguard.ErrOutcomeUnknown:    KindOutcomeUnknown,
	stockguard.ErrInsufficientStock: KindInsufficient,
	stockguard.ErrUnknownSKU:        KindUnknownSKU,
	stockguard.ErrInvalidRequest:    KindInvalid,
	stockguard.ErrContention:        KindContention,
	stockguard.ErrUnavailable:       KindUnavailable,
	stockguard.ErrUnknownOrder:      KindUnknownOrder,
	stockguard.ErrOrderMismatch:     KindOrderMismatch,
	stockguard.ErrOrderClosed:       KindOrderClosed,
	context.Canceled:                KindCanceled,
	context.DeadlineExceeded:        KindCanceled,
}

// String returns the kind's name as used in reports, e.g. "contention".
func (k Kind) String() string {
	if k < numKinds {
		return kindNames[k]
	}
	return "invalid-kind"
}

// Classify returns the Kind of an operation's result.
func Classify(err error) Kind {
	if err == nil {
		return KindOK
	}
	if k, ok := kindOf[strategy.Contract(err)]; ok {
		return k
	}
	return KindOther
}
