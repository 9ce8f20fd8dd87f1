package main

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stockguard/stockguard"
	"github.com/stockguard/stockguard/internal/memorders"
	"github.com/stockguard/stockguard/internal/memstock"
	"github.com/stockguard/stockguard/strategy"
)

// testToken is the admin token of the test servers.
const testToken = "test-admin-token-0123456789abcdef"

func newServer(t *testing.T, inv stockguard.Inventory) *server {
	s := &server{opTimeout: time.Second, holdTTL: time.Minute, maxQty: defaultMaxQty, buyerCap: defaultBuyerCap, maxTokenTTL: defaultMaxTokenTTL,
		revocations: newRevocations(0),
		buyerKey:    []byte(testBuyerKey), log: slog.New(slog.DiscardHandler), adminToken: testToken}
	s.inv, s.orders = instrument(inv)
	return s
}

// step is one request: by buyer alice on the public listener, or as the
// admin on the admin listener.
type step struct {
	admin              bool
	method, path, body string
	status             int
	code               string // errorBody.Code, or the reply's "state"
}

func runSteps(t *testing.T, api *testAPI, steps []step) {
	t.Helper()
	for _, s := range steps {
		url, headers := api.public.URL, asBuyer("alice")
		if s.admin {
			url, headers = api.admin.URL, asAdmin
		}
		r := do(t, s.method, url+s.path, s.body, headers)
		var reply struct{ Code, State string }
		_ = json.Unmarshal([]byte(r.body), &reply)
		got := reply.Code
		if got == "" {
			got = reply.State
		}
		if r.status != s.status || (s.code != "" && got != s.code) {
			t.Errorf("%s %s %s = %d %s, want %d %s", s.method, s.path, s.body, r.status, r.body, s.status, s.code)
		}
		if r.status == http.StatusServiceUnavailable && r.header.Get("Retry-After") == "" {
			t.Errorf("%s %s: 503 without Retry-After", s.method, s.path)
		}
		if r.status >= 400 && r.header.Get("Content-Type") != "application/json" {
			t.Errorf("%s %s: %d is %q, not JSON", s.method, s.path, r.status, r.header.Get("Content-Type"))
		}
	}
}

func TestServer_orders(t *testing.T) {
	api := newAPI(t, memorders.New())
	api.register(t, "alice")
	runSteps(t, api, []step{
		{true, "POST", "/skus/s1/stock", `{"qty": 3}`, 200, ""},
		{false, "POST", "/buy", `{"order_id": "o1", "sku": "s1", "qty": 2, "hold": true}`, 200, "held"},
		{false, "POST", "/buy", `{"order_id": "o1", "sku": "s1", "qty": 2, "hold": true}`, 200, "held"}, // retry: nothing taken twice
		{false, "GET", "/skus/s1", "", 200, ""},
		{false, "POST", "/buy", `{"order_id": "o2", "sku": "s1", "qty": 2}`, 409, "sold_out"},
		{false, "POST", "/buy", `{"order_id": "o1", "sku": "s1", "qty": 1}`, 409, "order_mismatch"},
		{true, "POST", "/buyers/alice/orders/o1/confirm", "", 200, "taken"},
		{false, "GET", "/orders/o1", "", 200, "taken"},
		{true, "GET", "/buyers/alice/orders/o1", "", 200, "taken"},
		{true, "POST", "/buyers/alice/orders/o1/return", "", 200, "returned"},
		{true, "POST", "/buyers/alice/orders/o1/confirm", "", 409, "order_closed"},
		{false, "GET", "/orders/nope", "", 404, "unknown_order"},
		{true, "POST", "/buyers/alice/orders/nope/return", "", 404, "unknown_order"},
		{false, "POST", "/buy", `{"order_id": "o3", "sku": "never", "qty": 1}`, 404, "unknown_sku"},
		{false, "POST", "/buy", `{"order_id": "o4", "sku": "s1", "qty": 0}`, 400, "bad_request"},
		{false, "POST", "/buy", `{"order_id": "o5", "sku": "s1", "qty": 1, "color": "red"}`, 400, "bad_request"},
		{false, "POST", "/buy", `not json`, 400, "bad_request"},
		{false, "POST", "/buy", `{"order_id": "o6", "sku": "~allowance:alice", "qty": 1}`, 400, "bad_request"},
		{true, "POST", "/skus/s1/stock", `{}`, 400, "bad_request"},
		{false, "POST", "/buy", `{"order_id": "` + strings.Repeat("x", maxBody) + `"}`, 413, "too_large"},
		{false, "GET", "/buy", "", 405, "method_not_allowed"},
		{false, "GET", "/nope", "", 404, "not_found"},
		{false, "POST", "/skus/s1/stock", `{"qty": 100}`, 404, "not_found"}, // the admin call is not on the public listener
		{false, "GET", "/metrics", "", 404, "not_found"},
	})
}

// A buyer must be registered, and a registration gives it its allowance.
func TestServer_buyerNotRegistered(t *testing.T) {
	api := newAPI(t, memorders.New())
	runSteps(t, api, []step{
		{true, "POST", "/skus/s1/stock", `{"qty": 3}`, 200, ""},
		{false, "POST", "/buy", `{"order_id": "o1", "sku": "s1", "qty": 1}`, 403, "not_registered"},
		{true, "POST", "/buyers/alice", "", 200, ""},
		{false, "POST", "/buy", `{"order_id": "o1", "sku": "s1", "qty": 1}`, 200, "taken"},
		{true, "POST", "/buyers/not%20a%20buyer", "", 400, "bad_request"},
	})
}

// The counterexample keeps no orders: it refuses order_id rather than
// pretend a retry is safe.
func TestServer_decrementWithoutOrders(t *testing.T) {
	api := newAPI(t, memstock.New())
	runSteps(t, api, []step{
		{true, "POST", "/skus/s1/stock", `{"qty": 1}`, 200, ""},
		{false, "POST", "/buy", `{"order_id": "o1", "sku": "s1", "qty": 1}`, 400, "bad_request"},
		{false, "POST", "/buy", `{"sku": "s1", "qty": 1}`, 200, "taken"},
		{false, "POST", "/buy", `{"sku": "s1", "qty": 1}`, 409, "sold_out"},
		{false, "POST", "/buy", `{"sku": "s1", "qty": 1, "hold": true}`, 501, "no_orders"},
		{false, "GET", "/orders/o1", "", 501, "no_orders"},
	})
}

func TestStatusOf_everyContractError(t *testing.T) {
	for _, err := range strategy.ContractErrors() {
		status, code, _ := statusOf(err)
		if code == "internal" || status < 400 {
			t.Errorf("%v → %d %s", err, status, code)
		}
	}
	if status, _, _ := statusOf(stockguard.ErrOutcomeUnknown); status != http.StatusInternalServerError {
		t.Errorf("outcome unknown → %d, want 500", status)
	}
}

// Registering a buyer again changes nothing: its allowance stays what its
// open orders left of it, so a second registration does not let it take
// its cap again.
func TestServer_registerAgainKeepsTheAllowance(t *testing.T) {
	api, _ := stocked(t, "s1", 100)
	api.register(t, "alice")
	buy := func(id string, qty int64) reply {
		return do(t, "POST", api.public.URL+"/buy", fmt.Sprintf(`{"order_id": %q, "sku": "s1", "qty": %d}`, id, qty), asBuyer("alice"))
	}
	for i := range defaultBuyerCap / defaultMaxQty {
		if r := buy(fmt.Sprint("o", i), defaultMaxQty); r.status != http.StatusOK {
			t.Fatalf("buy %d = %d %s", i, r.status, r.body)
		}
	}
	r := do(t, "POST", api.admin.URL+"/buyers/alice", "", asAdmin)
	if r.status != http.StatusOK || !strings.Contains(r.body, `"allowance":0`) {
		t.Errorf("registering alice again = %d %s, want 200 with allowance 0", r.status, r.body)
	}
	if r := buy("one-more", 1); r.status != http.StatusConflict || !strings.Contains(r.body, `"over_allowance"`) {
		t.Errorf("buy past the cap after a second registration = %d %s, want 409 over_allowance", r.status, r.body)
	}
}

// Restock adds a batch to a SKU on sale, once per restock_id: units sold
// meanwhile stay sold, and a retry adds nothing.
func TestServer_restockAddsOnce(t *testing.T) {
	api, inv := stocked(t, "s1", 5)
	api.register(t, "alice")
	runSteps(t, api, []step{
		{false, "POST", "/buy", `{"order_id": "o1", "sku": "s1", "qty": 2}`, 200, "taken"},
		{true, "POST", "/skus/s1/restock", `{"restock_id": "batch-1", "qty": 10}`, 200, ""},
		{true, "POST", "/skus/s1/restock", `{"restock_id": "batch-1", "qty": 10}`, 200, ""}, // a retry
		{true, "POST", "/skus/s1/restock", `{"restock_id": "batch-1", "qty": 11}`, 409, "order_mismatch"},
		{true, "POST", "/skus/never/restock", `{"restock_id": "batch-2", "qty": 1}`, 404, "unknown_sku"},
		{true, "POST", "/skus/s1/restock", `{"qty": 1}`, 400, "bad_request"},
		{false, "POST", "/skus/s1/restock", `{"restock_id": "batch-3", "qty": 1}`, 404, "not_found"}, // not on the public listener
	})
	if n := stockOf(t, inv, "s1"); n != 13 {
		t.Errorf("stock %d after 2 sold of 5 and a restock of 10, want 13", n)
	}
}
