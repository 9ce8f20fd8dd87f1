package main

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"go.opentelemetry.io/otel/trace"

	"github.com/stockguard/stockguard/internal/memorders"
	"github.com/stockguard/stockguard/stockotel"
)

// stockguard_units_taken_total counts the units buyers bought, once: not
// the allowance line of their orders as well, nor a retry again.
func TestServer_unitsTakenCountsWhatBuyersBought(t *testing.T) {
	reader := sdkmetric.NewManualReader()
	meters := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	inner := memorders.New()
	if err := inner.SetStock(t.Context(), "s1", 100); err != nil {
		t.Fatal(err)
	}
	api := newAPI(t, inner)
	api.srv.inv, api.srv.orders = instrument(inner, stockotel.WithMeterProvider(meters))
	api.register(t, "alice")
	for range 2 { // the buy and its retry
		if r := do(t, "POST", api.public.URL+"/buy", `{"order_id": "o1", "sku": "s1", "qty": 3}`, asBuyer("alice")); r.status != http.StatusOK {
			t.Fatalf("buy = %d %s", r.status, r.body)
		}
	}
	var got metricdata.ResourceMetrics
	if err := reader.Collect(t.Context(), &got); err != nil {
		t.Fatal(err)
	}
	var units int64
	for _, scope := range got.ScopeMetrics {
		for _, m := range scope.Metrics {
			if sum, ok := m.Data.(metricdata.Sum[int64]); ok && m.Name == stockotel.MetricUnitsTaken {
				for _, p := range sum.DataPoints {
					units += p.Value
				}
			}
		}
	}
	if units != 3 {
		t.Errorf("%s = %d after a buy of 3 units and its retry, want 3", stockotel.MetricUnitsTaken, units)
	}
}

// A retried hold that the admin has confirmed since answers the order's
// state, taken, not held.
func TestServer_retriedHoldAnswersItsState(t *testing.T) {
	api, _ := stocked(t, "s1", 5)
	api.register(t, "alice")
	runSteps(t, api, []step{
		{false, "POST", "/buy", `{"order_id": "h1", "sku": "s1", "qty": 1, "hold": true}`, 200, "held"},
		{true, "POST", "/buyers/alice/orders/h1/confirm", "", 200, "taken"},
		{false, "POST", "/buy", `{"order_id": "h1", "sku": "s1", "qty": 1, "hold": true}`, 200, "taken"},
	})
}

// IDs that print alike are refused, so that they cannot name two orders:
// a decomposed "café", a trailing variation selector, a Hangul filler, a
// no-break space. The precomposed "café" is an ID like any other.
func TestServer_refusesIDsThatPrintAlike(t *testing.T) {
	api, inv := stocked(t, "s1", 100)
	api.register(t, "alice")
	for _, tc := range []struct{ name, id string }{
		{"decomposed", "cafe\u0301"},
		{"variation selector", "caf\u00e9\ufe0f"},
		{"hangul filler", "caf\u00e9\u3164"},
		{"no-break space", "caf\u00e9\u00a0"},
	} {
		if r := do(t, "POST", api.public.URL+"/buy", `{"order_id": "`+tc.id+`", "sku": "s1", "qty": 1}`, asBuyer("alice")); r.status != http.StatusBadRequest {
			t.Errorf("%s order_id %+q = %d %s, want 400", tc.name, tc.id, r.status, r.body)
		}
	}
	if n := stockOf(t, inv, "s1"); n != 100 {
		t.Errorf("stock %d after refused IDs, want 100", n)
	}
	if r := do(t, "POST", api.public.URL+"/buy", `{"order_id": "caf\u00e9", "sku": "s1", "qty": 1}`, asBuyer("alice")); r.status != http.StatusOK {
		t.Errorf("precomposed café = %d %s, want 200", r.status, r.body)
	}
}

// A buyer's replies (its orders, its errors) and the admin's are not for a
// cache to keep.
func TestServer_perBuyerRepliesAreNotStored(t *testing.T) {
	api, _ := stocked(t, "s1", 5)
	api.register(t, "alice")
	for _, tc := range []struct {
		url, method, path, body string
		headers                 map[string]string
	}{
		{api.public.URL, "POST", "/buy", `{"order_id": "o1", "sku": "s1", "qty": 1}`, asBuyer("alice")},
		{api.public.URL, "GET", "/orders/o1", "", asBuyer("alice")},
		{api.public.URL, "GET", "/orders/o1", "", nil},
		{api.admin.URL, "GET", "/buyers/alice/orders/o1", "", asAdmin},
	} {
		if r := do(t, tc.method, tc.url+tc.path, tc.body, tc.headers); r.header.Get("Cache-Control") != "no-store" {
			t.Errorf("%s %s = %d with Cache-Control %q, want no-store", tc.method, tc.path, r.status, r.header.Get("Cache-Control"))
		}
	}
}

// The Bearer scheme is case-insensitive.
func TestServer_adminBearerAnyCase(t *testing.T) {
	api := newAPI(t, memorders.New())
	for _, scheme := range []string{"Bearer", "bearer", "BEARER"} {
		if r := do(t, "POST", api.admin.URL+"/skus/"+scheme+"/stock", `{"qty": 5}`, map[string]string{"Authorization": scheme + " " + testToken}); r.status != http.StatusOK {
			t.Errorf("%s token = %d %s, want 200", scheme, r.status, r.body)
		}
	}
}

// The admin token: at least minAdminTokenLen bytes; from a file without its
// trailing newline; given once.
func TestReadAdminToken(t *testing.T) {
	file := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(file, []byte(testToken+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if got, err := readAdminToken("", file); got != testToken || err != nil {
		t.Errorf("token from a file ending in a newline = %q, %v; want %q", got, err, testToken)
	}
	if got, err := readAdminToken("", ""); got != "" || err != nil {
		t.Errorf("no token = %q, %v; want administration off", got, err)
	}
	for _, tc := range []struct{ env, file string }{{"short-token", ""}, {testToken, file}} {
		if _, err := readAdminToken(tc.env, tc.file); err == nil {
			t.Errorf("env %q, file %q: no error", tc.env, tc.file)
		}
	}
}

// An admin address without a host is on loopback, not on every interface.
func TestLoopbackByDefault(t *testing.T) {
	for in, want := range map[string]string{
		"":             defaultAdminAddr,
		":9091":        "127.0.0.1:9091",
		"0.0.0.0:9090": "0.0.0.0:9090",
		"[::1]:9090":   "[::1]:9090",
	} {
		if got := loopbackByDefault(in); got != want {
			t.Errorf("loopbackByDefault(%q) = %q, want %q", in, got, want)
		}
	}
}

// A public client's traceparent starts no trace of its own in the
// service (it would be sampled, and its baggage carried); the admin
// listener's callers may continue theirs.
func TestHTTPServer_publicIgnoresTraceparent(t *testing.T) {
	tel, err := newTelemetry(false, "test")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tel.shutdown(context.Background()) })
	const traceID = "4bf92f3577b34da6a3ce929d0e0e4736"
	for _, public := range []bool{true, false} {
		var got trace.SpanContext
		h := http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) { got = trace.SpanContextFromContext(r.Context()) })
		ts := httptest.NewServer(httpServer(h, "test", config{}, slog.New(slog.DiscardHandler), public).Handler)
		do(t, "GET", ts.URL+"/", "", map[string]string{"traceparent": "00-" + traceID + "-00f067aa0ba902b7-01"})
		ts.Close()
		if continued := got.TraceID().String() == traceID; continued == public || public && got.IsSampled() {
			t.Errorf("public %v: the handler's span context is %v (sampled %v)", public, got.TraceID(), got.IsSampled())
		}
	}
}

// While the backend is down every request fails: at most warnBurst WARN
// lines per warnEvery, and the next one says how many were left out.
func TestServer_failureWarningsAreThrottled(t *testing.T) {
	api := newAPI(t, failingOrders{memorders.New()})
	var logs lockedBuffer
	api.srv.log = slog.New(slog.NewJSONHandler(&logs, nil))
	var now atomic.Int64 // the limiter's clock, read by the handlers' goroutines
	now.Store(time.Unix(1e9, 0).UnixNano())
	api.srv.warnings = &limiter{burst: warnBurst, every: warnEvery, now: func() time.Time { return time.Unix(0, now.Load()) }}
	const requests = 50
	for range requests {
		if r := do(t, "GET", api.public.URL+"/skus/s1", "", nil); r.status != http.StatusServiceUnavailable {
			t.Fatalf("stock read on a failing backend = %d %s", r.status, r.body)
		}
	}
	if n := strings.Count(logs.String(), `"msg":"request failed"`); n != warnBurst {
		t.Errorf("%d failed requests in one window logged %d lines, want %d", requests, n, warnBurst)
	}
	now.Add(int64(warnEvery))
	do(t, "GET", api.public.URL+"/skus/s1", "", nil)
	if want := fmt.Sprintf(`"suppressed":%d`, requests-warnBurst); !strings.Contains(logs.String(), want) {
		t.Errorf("the next window's line does not say %s:\n%s", want, logs.String())
	}
}

// Stocking a SKU is safe to send again: a SKU already stocked keeps its
// level (409 already_stocked) unless the call says to overwrite it.
func TestServer_stockingAgainKeepsTheLevel(t *testing.T) {
	api, inv := stocked(t, "s0", 1)
	api.register(t, "alice")
	runSteps(t, api, []step{
		{true, "POST", "/skus/s1/stock", `{"qty": 5}`, 200, ""},
		{false, "POST", "/buy", `{"order_id": "o1", "sku": "s1", "qty": 2}`, 200, "taken"},
		{true, "POST", "/skus/s1/stock", `{"qty": 5}`, 409, "already_stocked"},
	})
	if n := stockOf(t, inv, "s1"); n != 3 {
		t.Errorf("stock %d after stocking 5, selling 2 and stocking 5 again, want 3", n)
	}
	runSteps(t, api, []step{{true, "POST", "/skus/s1/stock", `{"qty": 10, "overwrite": true}`, 200, ""}})
	if n := stockOf(t, inv, "s1"); n != 10 {
		t.Errorf("stock %d after an overwrite with 10, want 10", n)
	}
}

// Every request is in the access log with its status, its request ID (the
// caller's when it is a plain one, else the service's, sent back either
// way) and its trace ID.
func TestHTTPServer_accessLog(t *testing.T) {
	tel, err := newTelemetry(false, "test")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tel.shutdown(context.Background()) })
	var logs lockedBuffer
	log := slog.New(slog.NewJSONHandler(&logs, nil))
	mux := http.NewServeMux()
	mux.HandleFunc("GET /teapot/{id}", func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusTeapot) })
	ts := httptest.NewServer(httpServer(mux, "test", config{accessLog: true}, log, true).Handler)
	t.Cleanup(ts.Close)
	for _, tc := range []struct{ sent, want string }{{"gw-42.a_b", "gw-42.a_b"}, {"two words", ""}, {"", ""}} {
		logs.mu.Lock()
		logs.b.Reset()
		logs.mu.Unlock()
		r := do(t, "GET", ts.URL+"/teapot/7", "", map[string]string{requestIDHeader: tc.sent})
		var rec struct {
			Msg       string `json:"msg"`
			Route     string `json:"route"`
			Status    int    `json:"status"`
			RequestID string `json:"request_id"`
			TraceID   string `json:"trace_id"`
		}
		line := logs.String()
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Fatalf("access log %q: %v", line, err)
		}
		id := r.header.Get(requestIDHeader)
		if rec.Msg != "request" || rec.Route != "GET /teapot/{id}" || rec.Status != http.StatusTeapot || rec.RequestID != id || !validRequestID(id) ||
			tc.want != "" && id != tc.want || tc.want == "" && id == tc.sent || len(rec.TraceID) != 32 || rec.TraceID == strings.Repeat("0", 32) {
			t.Errorf("request ID sent %q, answered %q; access log: %s", tc.sent, id, line)
		}
	}
}

// A buyer token expires: one past its expiry, one made to outlast
// -buyer-token-max-ttl, one whose times were changed and one in the old
// spelling without them are refused.
func TestServer_buyerTokensExpire(t *testing.T) {
	api, _ := stocked(t, "s1", 5)
	api.register(t, "alice")
	now := time.Now()
	valid := mintTokenAt("alice", now, now.Add(time.Hour))
	mac := valid[strings.LastIndexByte(valid, '.')+1:]
	for _, tc := range []struct {
		name, token string
		status      int
	}{
		{"valid for an hour", valid, http.StatusNotFound},
		{"expired", mintTokenAt("alice", now.Add(-time.Hour), now.Add(-time.Second)), http.StatusUnauthorized},
		{"past the longest lifetime", mintTokenAt("alice", now, now.Add(defaultMaxTokenTTL+time.Hour)), http.StatusUnauthorized},
		{"times changed", fmt.Sprintf("alice.%d.%d.%s", now.Unix(), now.Add(2*time.Hour).Unix(), mac), http.StatusUnauthorized},
		{"no times", "alice." + hex.EncodeToString(buyerMAC([]byte(testBuyerKey), "alice")), http.StatusUnauthorized},
	} {
		if r := do(t, "GET", api.public.URL+"/orders/none", "", map[string]string{buyerHeader: tc.token}); r.status != tc.status {
			t.Errorf("%s token: %d %s, want %d", tc.name, r.status, r.body, tc.status)
		}
	}
}

// The admin revokes a buyer's tokens: every one issued up to then is
// refused, on every copy (two servers over one inventory here); a token
// issued after is accepted.
func TestServer_buyerTokensRevoked(t *testing.T) {
	api, inv := stocked(t, "s1", 5)
	other := newAPI(t, inv) // another copy
	api.register(t, "alice")
	now := time.Now()
	old := map[string]string{buyerHeader: mintTokenAt("alice", now.Add(-time.Minute), now.Add(time.Hour))}
	for _, a := range []*testAPI{api, other} {
		if r := do(t, "GET", a.public.URL+"/orders/none", "", old); r.status != http.StatusNotFound {
			t.Fatalf("before the revocation: %d %s, want 404", r.status, r.body)
		}
	}
	r := do(t, "POST", api.admin.URL+"/buyers/alice/revoke", "", asAdmin)
	var reply revokeReply
	if err := json.Unmarshal([]byte(r.body), &reply); r.status != http.StatusOK || err != nil {
		t.Fatalf("revoke = %d %s", r.status, r.body)
	}
	issued := time.Unix(reply.Before, 0)
	fresh := map[string]string{buyerHeader: mintTokenAt("alice", issued, issued.Add(time.Hour))}
	for _, a := range []*testAPI{api, other} {
		if r := do(t, "GET", a.public.URL+"/orders/none", "", old); r.status != http.StatusUnauthorized {
			t.Errorf("a token issued before the revocation: %d %s, want 401", r.status, r.body)
		}
		if r := do(t, "GET", a.public.URL+"/orders/none", "", fresh); r.status != http.StatusNotFound {
			t.Errorf("a token issued after the revocation: %d %s, want 404", r.status, r.body)
		}
	}
}
