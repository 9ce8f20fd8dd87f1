package main

import (
	"context"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync/atomic"
	"time"

	"github.com/stockguard/stockguard"
	"github.com/stockguard/stockguard/strategy"
)

// replyTimeout is how long a handler gives its reply to be written once
// its inventory call has returned: the server's own write deadline counts
// from the end of the request's headers, before the body was read and the
// backend answered.
const replyTimeout = 5 * time.Second

// The limits a buyer meets, documented in README.md.
const (
	// defaultMaxQty is the most units one order may take (-max-qty).
	defaultMaxQty = 10
	// defaultBuyerCap is the allowance a buyer is registered with: the
	// most units it may have out on open orders, held or taken
	// (-buyer-cap).
	defaultBuyerCap = 20
)

// server is the flash-sale HTTP API over one inventory.
type server struct {
	inv       stockguard.Inventory
	orders    stockguard.Orders // nil only for the counterexample
	opTimeout time.Duration
	holdTTL   time.Duration
	maxQty    int64 // units one order may take
	buyerCap  int64 // a registered buyer's allowance
	buyerKey  []byte
	// maxTokenTTL bounds how far ahead a buyer token may expire.
	maxTokenTTL time.Duration
	log         *slog.Logger
	// warnings bounds the WARN lines of failed requests (limit.go); nil
	// logs each.
	warnings *limiter
	// revocations caches when each buyer's tokens were last revoked.
	revocations *revocations
	// adminToken guards the shop's calls; empty turns them off.
	adminToken string
	// ready reports whether the backends answer; nil is always ready.
	ready func(context.Context) error
	// draining is set once the service is stopping: /readyz answers 503
	// while the listeners still serve, so that a load balancer stops
	// sending requests before they close.
	draining atomic.Bool
}

// publicRoutes are the buyers' API, on -addr.
func (s *server) publicRoutes() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /buy", noStore(s.buy))
	mux.HandleFunc("GET /orders/{id}", noStore(s.buyerOrder))
	mux.HandleFunc("GET /skus/{sku}", s.stock)
	s.probes(mux)
	return jsonErrors(mux)
}

// adminRoutes are the shop's calls and the metrics, on -admin-addr: a
// listener kept off the public network, so that neither an anonymous
// scrape nor a guess at the admin token competes with the buyers.
func (s *server) adminRoutes(metrics http.Handler) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /skus/{sku}/stock", s.admin(s.setStock))
	mux.HandleFunc("POST /skus/{sku}/restock", s.admin(s.restock))
	mux.HandleFunc("POST /buyers/{buyer}", s.admin(s.register))
	mux.HandleFunc("POST /buyers/{buyer}/revoke", s.admin(s.revoke))
	mux.HandleFunc("GET /buyers/{buyer}/orders/{id}", s.admin(s.adminOrder))
	mux.HandleFunc("POST /buyers/{buyer}/orders/{id}/confirm", s.admin(s.confirm))
	mux.HandleFunc("POST /buyers/{buyer}/orders/{id}/return", s.admin(s.ret))
	mux.Handle("GET /metrics", metrics)
	s.probes(mux)
	return jsonErrors(mux)
}

// probes are liveness (/healthz: the process serves) and readiness
// (/readyz: it is not stopping, and its backends answer and keep what
// they acknowledge).
func (s *server) probes(mux *http.ServeMux) {
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusNoContent) })
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, r *http.Request) {
		if s.draining.Load() {
			w.Header().Set("Retry-After", retryAfter)
			_ = writeJSON(w, http.StatusServiceUnavailable, errorBody{Code: "draining", Error: "the service is stopping"})
			return
		}
		if s.ready != nil {
			ctx, cancel := s.opContext(r)
			defer cancel()
			if err := s.ready(ctx); err != nil {
				s.warn("not ready", "err", err)
				msg := "a backend does not answer"
				switch {
				case errors.Is(err, errLossyRedis):
					msg = "redis can lose an acknowledged order: see its persistence settings"
				case errors.Is(err, errFrontLost):
					msg = "the tiered front lost its data: recover it from the back"
				}
				w.Header().Set("Retry-After", retryAfter)
				_ = writeJSON(w, http.StatusServiceUnavailable, errorBody{Code: "unavailable", Error: msg})
				return
			}
		}
		w.WriteHeader(http.StatusNoContent)
	})
}

// admin guards the shop's calls: they need the request header
// "Authorization: Bearer <token>" with the service's admin token, and are
// off when it has none. Every call and every refusal is logged. Their
// replies are not to be cached (noStore).
func (s *server) admin(h http.HandlerFunc) http.HandlerFunc {
	return noStore(func(w http.ResponseWriter, r *http.Request) {
		if s.adminToken == "" {
			_ = writeJSON(w, http.StatusForbidden, errorBody{Code: "admin_disabled", Error: "administration is off: start the service with " + envAdminToken + " set"})
			return
		}
		// The scheme is case-insensitive (RFC 9110, 11.1).
		scheme, token, _ := strings.Cut(r.Header.Get("Authorization"), " ")
		if !strings.EqualFold(scheme, "Bearer") || subtle.ConstantTimeCompare([]byte(strings.TrimLeft(token, " ")), []byte(s.adminToken)) != 1 {
			s.log.Warn("admin call refused", "method", r.Method, "path", r.URL.Path, "remote", r.RemoteAddr)
			w.Header().Set("WWW-Authenticate", `Bearer realm="seckill admin"`)
			_ = writeJSON(w, http.StatusUnauthorized, errorBody{Code: "unauthorized", Error: "this call needs the admin token"})
			return
		}
		s.log.Info("admin call", "method", r.Method, "path", r.URL.Path, "remote", r.RemoteAddr)
		h(w, r)
	})
}

// noStore marks h's replies, a buyer's own orders and errors, as not to
// be stored by a cache between the service and the client.
func noStore(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "no-store")
		h(w, r)
	}
}

// buyer returns the request's authenticated buyer, or answers 401 (503
// when the revocations cannot be read).
func (s *server) buyer(w http.ResponseWriter, r *http.Request) (string, bool) {
	buyer, issued, ok := s.buyerOf(r)
	if ok {
		ctx, cancel := s.opContext(r)
		defer cancel()
		revoked, err := s.revocations.before(ctx, s.inv, buyer)
		if err != nil {
			s.fail(w, err, "")
			return "", false
		}
		ok = issued >= revoked
	}
	if !ok {
		w.Header().Set("WWW-Authenticate", `Seckill-Buyer realm="seckill"`)
		_ = writeJSON(w, http.StatusUnauthorized, errorBody{Code: "unauthenticated", Error: "this call needs a valid " + buyerHeader + " token: not expired, not revoked"})
	}
	return buyer, ok
}

// opContext detaches the inventory call from the buyer's connection: a
// buyer who hangs up must not turn a sale in flight into an unknown
// outcome. The call is bounded by opTimeout instead.
func (s *server) opContext(r *http.Request) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(r.Context()), s.opTimeout)
}

type stockRequest struct {
	Qty *int64 `json:"qty"`
	// Overwrite sets the level of a SKU already stocked.
	Overwrite bool `json:"overwrite"`
}

type stockReply struct {
	SKU   string `json:"sku"`
	Stock int64  `json:"stock"`
}

// setStock stocks a SKU, and leaves one already stocked as it is (409
// already_stocked) unless asked to overwrite its level: the same call sent
// again in the middle of a sale must not set back a level that buys have
// taken from. (Two first stockings of a SKU at the same moment both set
// it.) Units are added to a SKU on sale with restock.
func (s *server) setStock(w http.ResponseWriter, r *http.Request) {
	sku := r.PathValue("sku")
	if err := checkSKU(sku); err != nil {
		s.fail(w, err, "")
		return
	}
	var req stockRequest
	if !decode(w, r, &req, "qty", "overwrite") {
		return
	}
	if req.Qty == nil {
		s.fail(w, fmt.Errorf("%w: qty is required", stockguard.ErrInvalidRequest), "")
		return
	}
	ctx, cancel := s.opContext(r)
	defer cancel()
	if !req.Overwrite {
		switch have, err := s.inv.Stock(ctx, sku); {
		case err == nil:
			_ = writeJSON(w, http.StatusConflict, errorBody{Code: "already_stocked",
				Error: fmt.Sprintf("the SKU is stocked (%d left): add units with restock, or send \"overwrite\": true", have)})
			return
		case !errors.Is(err, stockguard.ErrUnknownSKU):
			s.fail(w, err, "")
			return
		}
	}
	if err := s.inv.SetStock(ctx, sku, *req.Qty); err != nil {
		s.fail(w, err, "")
		return
	}
	_ = writeJSON(w, http.StatusOK, stockReply{SKU: sku, Stock: *req.Qty})
}

func (s *server) stock(w http.ResponseWriter, r *http.Request) {
	sku := r.PathValue("sku")
	if err := checkSKU(sku); err != nil {
		s.fail(w, err, "")
		return
	}
	ctx, cancel := s.opContext(r)
	defer cancel()
	n, err := s.inv.Stock(ctx, sku)
	if err != nil {
		s.fail(w, err, "")
		return
	}
	_ = writeJSON(w, http.StatusOK, stockReply{SKU: sku, Stock: n})
}

type restockRequest struct {
	RestockID string `json:"restock_id"`
	Qty       *int64 `json:"qty"`
}

type restockReply struct {
	SKU       string `json:"sku"`
	RestockID string `json:"restock_id"`
	Qty       int64  `json:"qty"`
}

// restock adds a batch of units to a stocked SKU while it sells, once per
// restock_id: a retry adds nothing, and units bought meanwhile are not
// sold again, as a read of the level followed by SetStock would.
func (s *server) restock(w http.ResponseWriter, r *http.Request) {
	if s.orders == nil {
		_ = writeJSON(w, http.StatusNotImplemented, errorBody{Code: "no_orders", Error: "this strategy keeps no orders and cannot restock once"})
		return
	}
	sku := r.PathValue("sku")
	if err := checkSKU(sku); err != nil {
		s.fail(w, err, "")
		return
	}
	var req restockRequest
	if !decode(w, r, &req, "restock_id", "qty") {
		return
	}
	if req.Qty == nil || req.RestockID == "" {
		s.fail(w, fmt.Errorf("%w: restock_id and qty are required", stockguard.ErrInvalidRequest), "")
		return
	}
	if err := checkText("restock_id", req.RestockID); err != nil {
		s.fail(w, err, "")
		return
	}
	ctx, cancel := s.opContext(r)
	defer cancel()
	if err := s.orders.Restock(ctx, restockKey(req.RestockID), sku, *req.Qty); err != nil {
		s.fail(w, err, "")
		return
	}
	_ = writeJSON(w, http.StatusOK, restockReply{SKU: sku, RestockID: req.RestockID, Qty: *req.Qty})
}

type registerReply struct {
	Buyer string `json:"buyer"`
	// Allowance is what the buyer may still take: -buyer-cap less the
	// units out on its open orders.
	Allowance int64 `json:"allowance"`
}

// register gives a buyer its allowance, -buyer-cap units it may have out
// on open orders, once: registering again changes nothing.
func (s *server) register(w http.ResponseWriter, r *http.Request) {
	buyer := r.PathValue("buyer")
	if !validBuyer(buyer) {
		s.fail(w, fmt.Errorf("%w: a buyer ID is 1–%d of A–Z a–z 0–9 - _", stockguard.ErrInvalidRequest, maxBuyerLen), "")
		return
	}
	ctx, cancel := s.opContext(r)
	defer cancel()
	if err := s.registerOnce(ctx, buyer); err != nil {
		s.fail(w, err, "")
		return
	}
	left, err := s.inv.Stock(ctx, allowanceSKU(buyer))
	if err != nil {
		s.fail(w, err, "")
		return
	}
	_ = writeJSON(w, http.StatusOK, registerReply{Buyer: buyer, Allowance: left})
}

// registerOnce creates buyer's allowance SKU at 0 and restocks it with
// the cap under the registration's ID, so that the cap is added once per
// buyer: a registration repeated, retried or sent to another copy finds
// the restock applied (Order answers ErrOrderMismatch for a restock's ID)
// or is itself a retry of it, which adds nothing. Two first registrations
// of one buyer at the same moment can both create the SKU at 0 after the
// cap was added, leaving the buyer less than its cap, never more.
//
// Without Orders (the counterexample), the SKU is set to the cap when it
// does not exist yet, with that race unguarded.
func (s *server) registerOnce(ctx context.Context, buyer string) error {
	sku := allowanceSKU(buyer)
	if s.orders != nil {
		switch _, err := s.orders.Order(ctx, registrationKey(buyer)); {
		case errors.Is(err, stockguard.ErrOrderMismatch):
			return nil // registered
		case !errors.Is(err, stockguard.ErrUnknownOrder):
			return err
		}
	}
	switch _, err := s.inv.Stock(ctx, sku); {
	case s.orders == nil && errors.Is(err, stockguard.ErrUnknownSKU):
		return s.inv.SetStock(ctx, sku, s.buyerCap)
	case s.orders == nil:
		return err
	case errors.Is(err, stockguard.ErrUnknownSKU):
		if err := s.inv.SetStock(ctx, sku, 0); err != nil {
			return err
		}
	case err != nil:
		return err
	}
	return s.orders.Restock(ctx, registrationKey(buyer), sku, s.buyerCap)
}

// buyRequest is one buyer's checkout. OrderID is the buyer's idempotency
// key: retrying a buy with it (after a timeout, a 5xx) takes the units at
// most once. Hold asks for a hold to Confirm later.
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

// checkBuy refuses, before any I/O, a buy the service will not attempt.
func (s *server) checkBuy(req buyRequest) error {
	if s.orders != nil {
		if req.OrderID == "" {
			return fmt.Errorf("%w: order_id is required: it is what makes a retry take nothing twice", stockguard.ErrInvalidRequest)
		}
		if err := checkText("order_id", req.OrderID); err != nil {
			return err
		}
		if err := strategy.ValidateID(req.OrderID); err != nil {
			return err
		}
	} else if req.OrderID != "" {
		return fmt.Errorf("%w: this strategy keeps no orders and cannot honour order_id", stockguard.ErrInvalidRequest)
	}
	if err := checkSKU(req.SKU); err != nil {
		return err
	}
	if req.Qty < 1 || req.Qty > s.maxQty {
		return fmt.Errorf("%w: qty %d outside 1…%d", stockguard.ErrInvalidRequest, req.Qty, s.maxQty)
	}
	return nil
}

// buy takes the units as the buyer's order (Take, or Hold for a later
// Confirm), together with as many units of the buyer's allowance.
func (s *server) buy(w http.ResponseWriter, r *http.Request) {
	buyer, ok := s.buyer(w, r)
	if !ok {
		return
	}
	var req buyRequest
	if !decode(w, r, &req, "order_id", "sku", "qty", "hold") {
		return
	}
	if err := s.checkBuy(req); err != nil {
		s.fail(w, err, req.OrderID)
		return
	}
	ctx, cancel := s.opContext(r)
	defer cancel()
	bought := []line{{SKU: req.SKU, Qty: req.Qty}}
	if s.orders == nil {
		s.decrement(ctx, w, req)
		return
	}
	key := orderKey(buyer, req.OrderID)
	line := stockguard.Line{SKU: req.SKU, Qty: req.Qty}
	ctx = forBuyer(ctx, buyer) // the order takes from the buyer's allowance too
	var err error
	reply := orderReply{OrderID: req.OrderID, State: stockguard.OrderTaken.String(), Lines: bought}
	if req.Hold {
		if err = s.orders.Hold(ctx, key, s.holdTTL, line); err == nil {
			err = s.holdState(ctx, key, &reply)
		}
	} else {
		err = s.orders.Take(ctx, key, line)
	}
	if err != nil {
		if errors.Is(err, stockguard.ErrOutcomeUnknown) {
			s.warn("buy outcome unknown", "buyer", buyer, "order_id", req.OrderID, "err", err)
		}
		s.failBuy(ctx, w, err, buyer, req)
		return
	}
	// The order is applied: its 200 gets a deadline of its own, and a
	// reply that cannot be written is logged, since the buyer is left not
	// knowing (a retry with the same order_id tells it).
	if err := writeJSON(w, http.StatusOK, reply); err != nil {
		s.log.Error("reply lost after the order was applied", "buyer", buyer, "order_id", req.OrderID, "state", reply.State, "err", err)
	}
}

// holdState sets the reply of a hold that Hold answered nil from the
// order itself: Hold answers a retry nil also once the admin has confirmed
// the hold, which is taken by then. A read that fails leaves the buyer not
// knowing, as an unknown outcome does; its retry reads again.
func (s *server) holdState(ctx context.Context, key string, reply *orderReply) error {
	info, err := s.orders.Order(ctx, key)
	if err != nil {
		return fmt.Errorf("%w: the hold is applied and its state could not be read: %v", stockguard.ErrOutcomeUnknown, err)
	}
	reply.State = info.State.String()
	if !info.Deadline.IsZero() {
		reply.Deadline = &info.Deadline
	}
	return nil
}

// decrement is the counterexample's buy: a plain Decrement, no order.
func (s *server) decrement(ctx context.Context, w http.ResponseWriter, req buyRequest) {
	if req.Hold {
		_ = writeJSON(w, http.StatusNotImplemented, errorBody{Code: "no_orders", Error: "this strategy cannot hold"})
		return
	}
	if err := s.inv.Decrement(ctx, req.SKU, req.Qty); err != nil {
		s.fail(w, err, "")
		return
	}
	_ = writeJSON(w, http.StatusOK, orderReply{State: stockguard.OrderTaken.String(), Lines: []line{{SKU: req.SKU, Qty: req.Qty}}})
}

// failBuy answers a buy the inventory refused, telling a buyer short of
// allowance or not registered from a SKU sold out or unknown: the order
// does not say which of its lines refused, so the allowance is read.
func (s *server) failBuy(ctx context.Context, w http.ResponseWriter, err error, buyer string, req buyRequest) {
	switch strategy.Contract(err) {
	case stockguard.ErrUnknownSKU, stockguard.ErrInsufficientStock:
		left, aerr := s.inv.Stock(ctx, allowanceSKU(buyer))
		switch {
		case errors.Is(aerr, stockguard.ErrUnknownSKU):
			_ = writeJSON(w, http.StatusForbidden, errorBody{Code: "not_registered", Error: "the buyer has no allowance for this sale", OrderID: req.OrderID})
			return
		case aerr == nil && left < req.Qty:
			_ = writeJSON(w, http.StatusConflict, errorBody{Code: "over_allowance", Error: fmt.Sprintf("the buyer may take %d more units", left), OrderID: req.OrderID})
			return
		}
	}
	s.fail(w, err, req.OrderID)
}

// orderCall is an admin call on a buyer's order.
func (s *server) orderCall(w http.ResponseWriter, r *http.Request, state stockguard.OrderState, call func(context.Context, string) error) {
	key, id, ok := s.adminOrderKey(w, r)
	if !ok {
		return
	}
	ctx, cancel := s.opContext(r)
	defer cancel()
	if err := call(ctx, key); err != nil {
		s.fail(w, err, id)
		return
	}
	_ = writeJSON(w, http.StatusOK, orderReply{OrderID: id, State: state.String()})
}

func (s *server) confirm(w http.ResponseWriter, r *http.Request) {
	s.orderCall(w, r, stockguard.OrderTaken, func(ctx context.Context, key string) error { return s.orders.Confirm(ctx, key) })
}

func (s *server) ret(w http.ResponseWriter, r *http.Request) {
	s.orderCall(w, r, stockguard.OrderReturned, func(ctx context.Context, key string) error { return s.orders.Return(ctx, key) })
}

// adminOrderKey reads the buyer and order ID of an admin order route.
func (s *server) adminOrderKey(w http.ResponseWriter, r *http.Request) (key, id string, ok bool) {
	if s.orders == nil {
		_ = writeJSON(w, http.StatusNotImplemented, errorBody{Code: "no_orders", Error: "this strategy keeps no orders"})
		return "", "", false
	}
	buyer, id := r.PathValue("buyer"), r.PathValue("id")
	if !validBuyer(buyer) {
		s.fail(w, fmt.Errorf("%w: not a buyer ID", stockguard.ErrInvalidRequest), id)
		return "", "", false
	}
	if err := checkText("order_id", id); err != nil {
		s.fail(w, err, "")
		return "", "", false
	}
	return orderKey(buyer, id), id, true
}

func (s *server) adminOrder(w http.ResponseWriter, r *http.Request) {
	if key, id, ok := s.adminOrderKey(w, r); ok {
		s.order(w, r, key, id)
	}
}

// buyerOrder is GET /orders/{id}: the order of that ID of the buyer
// asking; another buyer's is unknown to it.
func (s *server) buyerOrder(w http.ResponseWriter, r *http.Request) {
	buyer, ok := s.buyer(w, r)
	if !ok {
		return
	}
	if s.orders == nil {
		_ = writeJSON(w, http.StatusNotImplemented, errorBody{Code: "no_orders", Error: "this strategy keeps no orders"})
		return
	}
	id := r.PathValue("id")
	if err := checkText("order_id", id); err != nil {
		s.fail(w, err, "")
		return
	}
	s.order(w, r, orderKey(buyer, id), id)
}

// order answers the order under key, reporting it as the client's id,
// with the buyer's own lines (not the allowance).
func (s *server) order(w http.ResponseWriter, r *http.Request, key, id string) {
	ctx, cancel := s.opContext(r)
	defer cancel()
	info, err := s.orders.Order(ctx, key)
	if err != nil {
		s.fail(w, err, id)
		return
	}
	reply := orderReply{OrderID: id, State: info.State.String()}
	for _, l := range info.Lines {
		if !strings.HasPrefix(l.SKU, reservedPrefix) {
			reply.Lines = append(reply.Lines, line{SKU: l.SKU, Qty: l.Qty})
		}
	}
	if !info.Deadline.IsZero() {
		reply.Deadline = &info.Deadline
	}
	_ = writeJSON(w, http.StatusOK, reply)
}

// writeJSON writes the reply under a write deadline of its own
// (replyTimeout from now) and flushes it, returning what kept it from the
// client.
func writeJSON(w http.ResponseWriter, status int, v any) error {
	rc := http.NewResponseController(w)
	if err := rc.SetWriteDeadline(time.Now().Add(replyTimeout)); err != nil && !errors.Is(err, http.ErrNotSupported) {
		return err
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	if err := json.NewEncoder(w).Encode(v); err != nil {
		return err
	}
	if err := rc.Flush(); err != nil && !errors.Is(err, http.ErrNotSupported) {
		return err
	}
	return nil
}
