package main

import (
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stockguard/stockguard"
	"github.com/stockguard/stockguard/internal/memorders"
	"github.com/stockguard/stockguard/internal/memstock"
)

// testToken is the admin token of the test servers; runSteps sends it.
const testToken = "test-admin-token"

func newServer(t *testing.T, inv stockguard.Inventory) *server {
	s := &server{inv: inv, opTimeout: time.Second, holdTTL: time.Minute, log: slog.New(slog.DiscardHandler), adminToken: testToken}
	if o, ok := inv.(stockguard.Orders); ok {
		s.orders = o
	}
	return s
}

func serve(t *testing.T, s *server) *httptest.Server {
	ts := httptest.NewServer(s.routes(http.NotFoundHandler()))
	t.Cleanup(ts.Close)
	return ts
}

func newTestServer(t *testing.T, inv stockguard.Inventory) *httptest.Server {
	return serve(t, newServer(t, inv))
}

type step struct {
	method, path, body string
	status             int
	code               string // errorBody.Code, or the reply's "state"
}

func runSteps(t *testing.T, ts *httptest.Server, steps []step) {
	t.Helper()
	for _, s := range steps {
		req, err := http.NewRequestWithContext(t.Context(), s.method, ts.URL+s.path, strings.NewReader(s.body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+testToken)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		raw, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		var reply struct{ Code, State string }
		_ = json.Unmarshal(raw, &reply)
		got := reply.Code
		if got == "" {
			got = reply.State
		}
		if resp.StatusCode != s.status || (s.code != "" && got != s.code) {
			t.Errorf("%s %s %s = %d %s, want %d %s", s.method, s.path, s.body, resp.StatusCode, raw, s.status, s.code)
		}
		if resp.StatusCode == http.StatusServiceUnavailable && resp.Header.Get("Retry-After") == "" {
			t.Errorf("%s %s: 503 without Retry-After", s.method, s.path)
		}
	}
}

func TestServer_orders(t *testing.T) {
	ts := newTestServer(t, memorders.New())
	runSteps(t, ts, []step{
		{"POST", "/skus/s1/stock", `{"qty": 3}`, 200, ""},
		{"POST", "/buy", `{"order_id": "o1", "sku": "s1", "qty": 2, "hold": true}`, 200, "held"},
		{"POST", "/buy", `{"order_id": "o1", "sku": "s1", "qty": 2, "hold": true}`, 200, "held"}, // retry: nothing taken twice
		{"GET", "/skus/s1", "", 200, ""},
		{"POST", "/buy", `{"order_id": "o2", "sku": "s1", "qty": 2}`, 409, "sold_out"},
		{"POST", "/buy", `{"order_id": "o1", "sku": "s1", "qty": 1}`, 409, "order_mismatch"},
		{"POST", "/orders/o1/confirm", "", 200, "taken"},
		{"GET", "/orders/o1", "", 200, "taken"},
		{"POST", "/orders/o1/return", "", 200, "returned"},
		{"POST", "/orders/o1/confirm", "", 409, "order_closed"},
		{"GET", "/orders/nope", "", 404, "unknown_order"},
		{"POST", "/orders/nope/return", "", 404, "unknown_order"},
		{"POST", "/buy", `{"order_id": "o3", "sku": "never", "qty": 1}`, 404, "unknown_sku"},
		{"POST", "/buy", `{"order_id": "o4", "sku": "s1", "qty": 0}`, 400, "bad_request"},
		{"POST", "/buy", `{"sku": "s1", "qty": 1, "color": "red"}`, 400, "bad_request"},
		{"POST", "/buy", `not json`, 400, "bad_request"},
		{"POST", "/skus/s1/stock", `{}`, 400, "bad_request"},
		{"POST", "/buy", `{"order_id": "` + strings.Repeat("x", maxBody) + `"}`, 413, "too_large"},
		{"GET", "/buy", "", 405, ""},
	})
}

func TestServer_decrementWithoutOrders(t *testing.T) {
	ts := newTestServer(t, memstock.New())
	runSteps(t, ts, []step{
		{"POST", "/skus/s1/stock", `{"qty": 1}`, 200, ""},
		{"POST", "/buy", `{"sku": "s1", "qty": 1}`, 200, "taken"},
		{"POST", "/buy", `{"sku": "s1", "qty": 1}`, 409, "sold_out"},
		{"POST", "/buy", `{"sku": "s1", "qty": 1, "hold": true}`, 501, "no_orders"},
		{"GET", "/orders/o1", "", 501, "no_orders"},
	})
}

func TestStatusOf_everyContractError(t *testing.T) {
	for _, err := range stockguard.ContractErrors() {
		status, code := statusOf(err)
		if code == "internal" || status < 400 {
			t.Errorf("%v → %d %s", err, status, code)
		}
	}
	if status, _ := statusOf(stockguard.ErrOutcomeUnknown); status != http.StatusInternalServerError {
		t.Errorf("outcome unknown → %d, want 500", status)
	}
}
