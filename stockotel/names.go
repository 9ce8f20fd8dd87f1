package stockotel

import (
	"context"

	"github.com/stockguard/stockguard"
	"github.com/stockguard/stockguard/strategy"
)

// ScopeName is the instrumentation scope of the meter and tracer.
const ScopeName = "github.com/stockguard/stockguard/stockotel"

// Instrument names, in the OpenTelemetry semantic-convention style
// (dot-separated namespaces, durations in seconds, units in UCUM).
const (
	// MetricOperations counts calls, by AttrOperation, AttrOutcome and
	// AttrStrategy. Unit {operation}.
	MetricOperations = "stockguard.operations"
	// MetricDuration is a histogram of call durations in seconds, by
	// the same attributes as MetricOperations.
	MetricDuration = "stockguard.operation.duration"
	// MetricUnitsTaken counts the units of successful Decrement calls, and
	// of Take and Hold once per order: a retried Take or Hold that the
	// strategy answers nil without taking again counts nothing, and one
	// that ended ErrOutcomeUnknown counts when a read finds it applied
	// (Orders.Take says how). By AttrOperation and AttrStrategy.
	MetricUnitsTaken = "stockguard.units.taken"
	// MetricOutcomeUnknown counts calls that returned
	// stockguard.ErrOutcomeUnknown: units that may or may not have moved,
	// to reconcile. By AttrOperation and AttrStrategy.
	MetricOutcomeUnknown = "stockguard.outcome.unknown"
	// MetricOrders counts order calls (Take, Hold, Confirm, Return,
	// Restock, Order) by AttrOperation, AttrOutcome and, when the call
	// succeeded, AttrOrderState: the state the order is in afterwards.
	MetricOrders = "stockguard.orders"
	// MetricRetries observes strategy.RetryCounter.Retries of the
	// wrapped strategy, when it has one.
	MetricRetries = "stockguard.retries"
	// MetricBatches and MetricBatchRequests observe a combining strategy's
	// Stats: writes made, and requests they carried. Their ratio is the
	// mean batch size.
	MetricBatches       = "stockguard.batches"
	MetricBatchRequests = "stockguard.batch.requests"
)

// Span name prefix: spans are named SpanPrefix + the method, e.g.
// "stockguard.Decrement".
const SpanPrefix = "stockguard."

// Attribute keys.
const (
	// AttrOperation is the method: see the Op constants.
	AttrOperation = "stockguard.operation"
	// AttrOutcome is OutcomeOK or the class of the error (Outcome).
	AttrOutcome = "stockguard.outcome"
	// AttrStrategy names the wrapped strategy (WithStrategy).
	AttrStrategy = "stockguard.strategy"
	// AttrOrderState is an order's state after a successful order call.
	AttrOrderState = "stockguard.order.state"
	// Span-only attributes: high cardinality, never on a metric.
	AttrSKU       = "stockguard.sku"
	AttrQty       = "stockguard.qty"
	AttrOrderID   = "stockguard.order.id"
	AttrLineCount = "stockguard.order.lines"
	// AttrErrorType is the semantic conventions' error.type, set on spans
	// of failed calls to the same value as AttrOutcome.
	AttrErrorType = "error.type"
)

// Values of AttrOperation.
const (
	OpDecrement = "decrement"
	OpSetStock  = "set_stock"
	OpStock     = "stock"
	OpTake      = "take"
	OpHold      = "hold"
	OpConfirm   = "confirm"
	OpReturn    = "return"
	OpRestock   = "restock"
	OpOrder     = "order"
)

// Values of AttrOutcome: OutcomeOK, one per contract error, and
// OutcomeOther for an error outside the contract (a strategy bug).
const (
	OutcomeOK                = "ok"
	OutcomeOutcomeUnknown    = "outcome_unknown"
	OutcomeInsufficientStock = "insufficient_stock"
	OutcomeUnknownSKU        = "unknown_sku"
	OutcomeInvalidRequest    = "invalid_request"
	OutcomeContention        = "contention"
	OutcomeUnavailable       = "unavailable"
	OutcomeUnknownOrder      = "unknown_order"
	OutcomeOrderMismatch     = "order_mismatch"
	OutcomeOrderClosed       = "order_closed"
	OutcomeCanceled          = "canceled"
	OutcomeDeadlineExceeded  = "deadline_exceeded"
	OutcomeOther             = "other"
)

// Outcome returns the stable name of err's contract error class
// (strategy.Contract): OutcomeOK for nil, OutcomeOther outside the
// contract.
func Outcome(err error) string {
	if err == nil {
		return OutcomeOK
	}
	switch strategy.Contract(err) {
	case stockguard.ErrOutcomeUnknown:
		return OutcomeOutcomeUnknown
	case stockguard.ErrInsufficientStock:
		return OutcomeInsufficientStock
	case stockguard.ErrUnknownSKU:
		return OutcomeUnknownSKU
	case stockguard.ErrInvalidRequest:
		return OutcomeInvalidRequest
	case stockguard.ErrContention:
		return OutcomeContention
	case stockguard.ErrUnavailable:
		return OutcomeUnavailable
	case stockguard.ErrUnknownOrder:
		return OutcomeUnknownOrder
	case stockguard.ErrOrderMismatch:
		return OutcomeOrderMismatch
	case stockguard.ErrOrderClosed:
		return OutcomeOrderClosed
	case context.Canceled:
		return OutcomeCanceled
	case context.DeadlineExceeded:
		return OutcomeDeadlineExceeded
	}
	return OutcomeOther
}

// failure reports whether an outcome means the system failed, rather than
// the buyer being told no: those spans get status Error.
func failure(outcome string) bool {
	switch outcome {
	case OutcomeOutcomeUnknown, OutcomeContention, OutcomeUnavailable, OutcomeOther:
		return true
	}
	return false
}
