package main

import (
	"context"
	"net/http"

	"github.com/stockguard/stockguard"
)

// errorBody is every error response: a stable code for programs, the
// error text for people, and, for a call about an order, its ID — the one
// the service made up for a buy without one included — to ask about it or
// to retry with (Orders make that retry exactly-once).
type errorBody struct {
	Code    string `json:"code"`
	Error   string `json:"error"`
	OrderID string `json:"order_id,omitempty"`
}

// retryAfter is the Retry-After, in seconds, of a 503.
const retryAfter = "1"

// statusOf maps the contract error class of err to an HTTP status and a
// code. An error outside the contract is a bug: 500.
func statusOf(err error) (int, string) {
	switch stockguard.Contract(err) {
	case stockguard.ErrInsufficientStock:
		return http.StatusConflict, "sold_out"
	case stockguard.ErrUnknownSKU:
		return http.StatusNotFound, "unknown_sku"
	case stockguard.ErrUnknownOrder:
		return http.StatusNotFound, "unknown_order"
	case stockguard.ErrInvalidRequest:
		return http.StatusBadRequest, "bad_request"
	case stockguard.ErrContention:
		return http.StatusServiceUnavailable, "busy"
	case stockguard.ErrUnavailable:
		return http.StatusServiceUnavailable, "unavailable"
	case stockguard.ErrOutcomeUnknown:
		return http.StatusInternalServerError, "outcome_unknown"
	case stockguard.ErrOrderMismatch:
		return http.StatusConflict, "order_mismatch"
	case stockguard.ErrOrderClosed:
		return http.StatusConflict, "order_closed"
	case context.DeadlineExceeded:
		return http.StatusServiceUnavailable, "timeout"
	case context.Canceled:
		// The server is stopping or the buyer left; nothing was applied.
		return http.StatusServiceUnavailable, "canceled"
	}
	return http.StatusInternalServerError, "internal"
}

func writeError(w http.ResponseWriter, err error, orderID string) {
	status, code := statusOf(err)
	if status == http.StatusServiceUnavailable {
		w.Header().Set("Retry-After", retryAfter)
	}
	writeJSON(w, status, errorBody{Code: code, Error: err.Error(), OrderID: orderID})
}
