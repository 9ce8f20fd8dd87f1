package main

import (
	"context"
	"net/http"

	"github.com/stockguard/stockguard"
	"github.com/stockguard/stockguard/strategy"
)

// errorBody is every error response: a stable code for programs, a
// message for people, and, for a call about an order, the client's order
// ID. The message never carries a backend's error text (key layout,
// addresses): that goes to the log.
type errorBody struct {
	Code    string `json:"code"`
	Error   string `json:"error"`
	OrderID string `json:"order_id,omitempty"`
}

// retryAfter is the Retry-After, in seconds, of a 503.
const retryAfter = "1"

// statusOf maps the contract error class of err to an HTTP status, a
// code and a message. An error outside the contract is a bug: 500.
func statusOf(err error) (int, string, string) {
	switch strategy.Contract(err) {
	case stockguard.ErrInsufficientStock:
		return http.StatusConflict, "sold_out", "not enough stock left"
	case stockguard.ErrUnknownSKU:
		return http.StatusNotFound, "unknown_sku", "no such SKU"
	case stockguard.ErrUnknownOrder:
		return http.StatusNotFound, "unknown_order", "no such order"
	case stockguard.ErrInvalidRequest:
		return http.StatusBadRequest, "bad_request", "bad request"
	case stockguard.ErrContention:
		return http.StatusServiceUnavailable, "busy", "busy: nothing was taken, retry later"
	case stockguard.ErrUnavailable:
		return http.StatusServiceUnavailable, "unavailable", "the backend cannot serve: nothing was taken, retry later"
	case stockguard.ErrOutcomeUnknown:
		return http.StatusInternalServerError, "outcome_unknown", "the outcome is unknown: retry with the same order_id"
	case stockguard.ErrOrderMismatch:
		return http.StatusConflict, "order_mismatch", "the order ID was used for another order"
	case stockguard.ErrOrderClosed:
		return http.StatusConflict, "order_closed", "the order was returned or its hold expired"
	case context.DeadlineExceeded:
		return http.StatusServiceUnavailable, "timeout", "timed out: retry with the same order_id"
	case context.Canceled:
		// The server is stopping; nothing was applied.
		return http.StatusServiceUnavailable, "canceled", "canceled: retry with the same order_id"
	}
	return http.StatusInternalServerError, "internal", "internal error"
}

// fail answers err. A bad request's text is about the client's own input
// and is shown; a 5xx is logged (within the warnings' limit) and, like
// every other error, answered with its code's fixed message.
func (s *server) fail(w http.ResponseWriter, err error, orderID string) {
	status, code, msg := statusOf(err)
	switch {
	case status == http.StatusBadRequest:
		msg = err.Error()
	case status >= 500:
		s.warn("request failed", "code", code, "order_id", orderID, "err", err)
	}
	if status == http.StatusServiceUnavailable {
		w.Header().Set("Retry-After", retryAfter)
	}
	_ = writeJSON(w, status, errorBody{Code: code, Error: msg, OrderID: orderID})
}

// jsonErrors answers the mux's own 404 and 405 in the API's JSON, keeping
// the 405's Allow header.
func jsonErrors(mux *http.ServeMux) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h, pattern := mux.Handler(r)
		if pattern != "" {
			mux.ServeHTTP(w, r)
			return
		}
		probe := &statusProbe{header: http.Header{}}
		h.ServeHTTP(probe, r)
		if allow := probe.header.Get("Allow"); allow != "" {
			w.Header().Set("Allow", allow)
		}
		switch probe.status {
		case http.StatusMethodNotAllowed:
			_ = writeJSON(w, probe.status, errorBody{Code: "method_not_allowed", Error: "method not allowed"})
		case http.StatusNotFound:
			_ = writeJSON(w, probe.status, errorBody{Code: "not_found", Error: "no such route"})
		default:
			// A redirect (a path to clean): pass it on as the mux made it.
			mux.ServeHTTP(w, r)
		}
	})
}

// statusProbe records the status and headers a handler would answer with.
type statusProbe struct {
	header http.Header
	status int
}

func (p *statusProbe) Header() http.Header         { return p.header }
func (p *statusProbe) WriteHeader(status int)      { p.status = status }
func (p *statusProbe) Write(b []byte) (int, error) { return len(b), nil }
