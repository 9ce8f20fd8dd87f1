package main

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/stockguard/stockguard"
)

// maxBody bounds every request body: the largest legal one, an order
// with a 128-byte ID, is far below it.
const maxBody = 4 << 10

// server is the flash-sale HTTP API over one inventory.
type server struct {
	inv       stockguard.Inventory
	orders    stockguard.Orders // nil when the strategy has no orders
	opTimeout time.Duration
	holdTTL   time.Duration
	log       *slog.Logger
	// adminToken guards stocking and order administration; empty turns
	// them off.
	adminToken string
}

func (s *server) routes(metrics http.Handler) *http.ServeMux {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /skus/{sku}/stock", s.admin(s.setStock))
	mux.HandleFunc("GET /skus/{sku}", s.stock)
	mux.HandleFunc("POST /buy", s.buy)
	mux.HandleFunc("POST /orders/{id}/confirm", s.admin(s.confirm))
	mux.HandleFunc("POST /orders/{id}/return", s.admin(s.ret))
	mux.HandleFunc("GET /orders/{id}", s.order)
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusNoContent) })
	mux.Handle("GET /metrics", metrics)
	return mux
}

// admin guards the shop's calls — stocking a SKU, confirming or returning
// an order by its ID — that a buyer must not make: they need the request
// header "Authorization: Bearer <token>" with the service's admin token,
// and are off when it has none.
func (s *server) admin(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if s.adminToken == "" {
			writeJSON(w, http.StatusForbidden, errorBody{Code: "admin_disabled", Error: "administration is off: start the service with " + envAdminToken + " set"})
			return
		}
		token, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		if !ok || subtle.ConstantTimeCompare([]byte(token), []byte(s.adminToken)) != 1 {
			w.Header().Set("WWW-Authenticate", `Bearer realm="seckill admin"`)
			writeJSON(w, http.StatusUnauthorized, errorBody{Code: "unauthorized", Error: "this call needs the admin token"})
			return
		}
		h(w, r)
	}
}

// opContext detaches the inventory call from the buyer's connection: a
// buyer who hangs up must not turn a sale in flight into an unknown
// outcome. The call is bounded by opTimeout instead.
func (s *server) opContext(r *http.Request) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(r.Context()), s.opTimeout)
}

type stockRequest struct {
	Qty *int64 `json:"qty"`
}

type stockReply struct {
	SKU   string `json:"sku"`
	Stock int64  `json:"stock"`
}

func (s *server) setStock(w http.ResponseWriter, r *http.Request) {
	var req stockRequest
	if !decode(w, r, &req) {
		return
	}
	if req.Qty == nil {
		writeError(w, fmt.Errorf("%w: qty is required", stockguard.ErrInvalidRequest), "")
		return
	}
	sku := r.PathValue("sku")
	ctx, cancel := s.opContext(r)
	defer cancel()
	if err := s.inv.SetStock(ctx, sku, *req.Qty); err != nil {
		writeError(w, err, "")
		return
	}
	writeJSON(w, http.StatusOK, stockReply{SKU: sku, Stock: *req.Qty})
}

func (s *server) stock(w http.ResponseWriter, r *http.Request) {
	sku := r.PathValue("sku")
	ctx, cancel := s.opContext(r)
	defer cancel()
	n, err := s.inv.Stock(ctx, sku)
	if err != nil {
		writeError(w, err, "")
		return
	}
	writeJSON(w, http.StatusOK, stockReply{SKU: sku, Stock: n})
}

// buyRequest is one buyer's checkout. OrderID is the buyer's idempotency
// key: retrying a buy with it (after a 500 outcome_unknown, a timeout)
// takes the units at most once. Hold asks for a hold to Confirm later.
type buyRequest struct {
	OrderID string `json:"order_id"`
	SKU     string `json:"sku"`
	Qty     int64  `json:"qty"`
	Hold    bool   `json:"hold"`
}

type orderReply struct {
	OrderID  string     `json:"order_id,omitempty"`
	State    string     `json:"state"`
	Lines    []line     `json:"lines,omitempty"`
	Deadline *time.Time `json:"deadline,omitempty"`
}

// line is a stockguard.Line in the API's JSON spelling.
type line struct {
	SKU string `json:"sku"`
	Qty int64  `json:"qty"`
}

func linesOf(in []stockguard.Line) []line {
	out := make([]line, len(in))
	for i, l := range in {
		out[i] = line{SKU: l.SKU, Qty: l.Qty}
	}
	return out
}

// buy takes the units: as an order (Take, or Hold for a later Confirm)
// when the strategy keeps orders, else a plain Decrement.
func (s *server) buy(w http.ResponseWriter, r *http.Request) {
	var req buyRequest
	if !decode(w, r, &req) {
		return
	}
	ctx, cancel := s.opContext(r)
	defer cancel()
	want := stockguard.Line{SKU: req.SKU, Qty: req.Qty}
	if s.orders == nil {
		if req.Hold {
			writeJSON(w, http.StatusNotImplemented, errorBody{Code: "no_orders", Error: "this strategy cannot hold"})
			return
		}
		if err := s.inv.Decrement(ctx, req.SKU, req.Qty); err != nil {
			writeError(w, err, "")
			return
		}
		writeJSON(w, http.StatusOK, orderReply{State: stockguard.OrderTaken.String(), Lines: []line{{SKU: req.SKU, Qty: req.Qty}}})
		return
	}
	if req.OrderID == "" {
		req.OrderID = newOrderID()
	}
	var err error
	state := stockguard.OrderTaken
	if req.Hold {
		state = stockguard.OrderHeld
		err = s.orders.Hold(ctx, req.OrderID, s.holdTTL, want)
	} else {
		err = s.orders.Take(ctx, req.OrderID, want)
	}
	if err != nil {
		if errors.Is(err, stockguard.ErrOutcomeUnknown) {
			s.log.Warn("buy outcome unknown", "order_id", req.OrderID, "err", err)
		}
		writeError(w, err, req.OrderID)
		return
	}
	writeJSON(w, http.StatusOK, orderReply{OrderID: req.OrderID, State: state.String(), Lines: []line{{SKU: req.SKU, Qty: req.Qty}}})
}

func (s *server) confirm(w http.ResponseWriter, r *http.Request) {
	s.orderCall(w, r, stockguard.OrderTaken, func(ctx context.Context, id string) error { return s.orders.Confirm(ctx, id) })
}

func (s *server) ret(w http.ResponseWriter, r *http.Request) {
	s.orderCall(w, r, stockguard.OrderReturned, func(ctx context.Context, id string) error { return s.orders.Return(ctx, id) })
}

func (s *server) orderCall(w http.ResponseWriter, r *http.Request, state stockguard.OrderState, call func(context.Context, string) error) {
	if s.orders == nil {
		writeJSON(w, http.StatusNotImplemented, errorBody{Code: "no_orders", Error: "this strategy keeps no orders"})
		return
	}
	id := r.PathValue("id")
	ctx, cancel := s.opContext(r)
	defer cancel()
	if err := call(ctx, id); err != nil {
		writeError(w, err, id)
		return
	}
	writeJSON(w, http.StatusOK, orderReply{OrderID: id, State: state.String()})
}

func (s *server) order(w http.ResponseWriter, r *http.Request) {
	if s.orders == nil {
		writeJSON(w, http.StatusNotImplemented, errorBody{Code: "no_orders", Error: "this strategy keeps no orders"})
		return
	}
	id := r.PathValue("id")
	ctx, cancel := s.opContext(r)
	defer cancel()
	info, err := s.orders.Order(ctx, id)
	if err != nil {
		writeError(w, err, id)
		return
	}
	reply := orderReply{OrderID: info.ID, State: info.State.String(), Lines: linesOf(info.Lines)}
	if !info.Deadline.IsZero() {
		reply.Deadline = &info.Deadline
	}
	writeJSON(w, http.StatusOK, reply)
}

// decode reads a bounded JSON body with no unknown fields, answering 400
// (or 413) itself when it cannot.
func decode(w http.ResponseWriter, r *http.Request, v any) bool {
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxBody))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			writeJSON(w, http.StatusRequestEntityTooLarge, errorBody{Code: "too_large", Error: err.Error()})
			return false
		}
		writeError(w, fmt.Errorf("%w: body: %w", stockguard.ErrInvalidRequest, err), "")
		return false
	}
	return true
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func newOrderID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
