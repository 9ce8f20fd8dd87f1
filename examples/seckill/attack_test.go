package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stockguard/stockguard"
	"github.com/stockguard/stockguard/internal/memorders"
)

// The attacks of issue 40, one test each: what a hostile or unlucky
// client does to the service, and what it must not get.

// stocked returns a service over a fresh in-memory Orders with sku stocked.
func stocked(t *testing.T, sku string, qty int64) (*testAPI, *memorders.Store) {
	t.Helper()
	inv := memorders.New()
	if err := inv.SetStock(t.Context(), sku, qty); err != nil {
		t.Fatal(err)
	}
	return newAPI(t, inv), inv
}

// A strategy without Orders would take again on every retry of a buy:
// the service refuses to start with it, saying why, before it touches a
// backend.
func TestService_refusesStrategyWithoutOrders(t *testing.T) {
	for _, strategy := range []string{"redis-guarded", "redis-watchtx", "mysql-pessimistic", "mysql-optimistic", "mutex-counterexample"} {
		out, err := runBinary(t, "-strategy", strategy, "-redis-addr", "127.0.0.1:1", "-mysql-dsn", "nobody@tcp(127.0.0.1:1)/none")
		if err == nil || !strings.Contains(out, "exactly-once") {
			t.Errorf("-strategy %s: exit %v, want a refusal naming exactly-once:\n%s", strategy, err, out)
		}
	}
}

// runBinary runs the service with args until it exits (it must, within a
// minute) and returns its stderr and exit error.
func runBinary(t *testing.T, args ...string) (string, error) {
	t.Helper()
	bin := binary(t) // built first: the build is not the minute the run gets
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, append([]string{"-addr", "127.0.0.1:0", "-admin-addr", "127.0.0.1:0"}, args...)...)
	cmd.Env = append(cmd.Environ(), envAdminToken+"="+testToken, envBuyerKey+"="+testBuyerKey)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	err := cmd.Run()
	return stderr.String(), err
}

// A buy without order_id cannot be retried safely: it is refused, and no
// ID is made up for it.
func TestServer_buyRequiresOrderID(t *testing.T) {
	api, inv := stocked(t, "s1", 100)
	api.register(t, "alice")
	r := do(t, "POST", api.public.URL+"/buy", `{"sku": "s1", "qty": 1}`, asBuyer("alice"))
	if r.status != http.StatusBadRequest || !strings.Contains(r.body, `"bad_request"`) || strings.Contains(r.body, `"order_id"`) {
		t.Errorf("buy without order_id = %d %s, want 400 bad_request with no order_id", r.status, r.body)
	}
	if n := stockOf(t, inv, "s1"); n != 100 {
		t.Errorf("stock %d after a refused buy, want 100", n)
	}
}

// An order belongs to the buyer who placed it: another buyer's same ID is
// another order, a buy needs a buyer, and only the buyer reads the order.
func TestServer_ordersBelongToTheirBuyer(t *testing.T) {
	api, inv := stocked(t, "s1", 100)
	api.register(t, "alice")
	api.register(t, "bob")
	buy := `{"order_id": "o-1", "sku": "s1", "qty": 2}`
	for _, buyer := range []string{"alice", "bob"} {
		if r := do(t, "POST", api.public.URL+"/buy", buy, asBuyer(buyer)); r.status != http.StatusOK {
			t.Fatalf("%s's buy = %d %s", buyer, r.status, r.body)
		}
	}
	if n := stockOf(t, inv, "s1"); n != 96 {
		t.Errorf("stock %d after two buyers' orders o-1 of 2 units, want 96", n)
	}
	for _, tc := range []struct {
		name    string
		method  string
		path    string
		body    string
		headers map[string]string
		status  int
	}{
		{"buy without a buyer", "POST", "/buy", `{"order_id": "o-2", "sku": "s1", "qty": 1}`, nil, http.StatusUnauthorized},
		{"buy with a forged token", "POST", "/buy", `{"order_id": "o-2", "sku": "s1", "qty": 1}`, map[string]string{buyerHeader: "alice." + strings.Repeat("0", 64)}, http.StatusUnauthorized},
		{"order without a buyer", "GET", "/orders/o-1", "", nil, http.StatusUnauthorized},
		{"another buyer's order", "GET", "/orders/o-1", "", asBuyer("carol"), http.StatusNotFound},
		{"own order", "GET", "/orders/o-1", "", asBuyer("alice"), http.StatusOK},
	} {
		if r := do(t, tc.method, api.public.URL+tc.path, tc.body, tc.headers); r.status != tc.status {
			t.Errorf("%s: %s %s = %d %s, want %d", tc.name, tc.method, tc.path, r.status, r.body, tc.status)
		}
	}
	if n := stockOf(t, inv, "s1"); n != 96 {
		t.Errorf("stock %d after refused buys, want 96", n)
	}
}

// One order takes at most the per-order maximum, and one buyer has at
// most its allowance out on open orders, held or taken; a returned order
// gives its allowance back.
func TestServer_holdLimits(t *testing.T) {
	api, inv := stocked(t, "s1", stockguard.MaxQty/2)
	api.register(t, "alice")
	hold := func(id string, qty int64) reply {
		return do(t, "POST", api.public.URL+"/buy", fmt.Sprintf(`{"order_id": %q, "sku": "s1", "qty": %d, "hold": true}`, id, qty), asBuyer("alice"))
	}
	if r := hold("big", stockguard.MaxQty/2); r.status != http.StatusBadRequest {
		t.Errorf("hold of %d units = %d %s, want 400", stockguard.MaxQty/2, r.status, r.body)
	}
	if r := hold("over", defaultMaxQty+1); r.status != http.StatusBadRequest {
		t.Errorf("hold of the per-order maximum + 1 = %d %s, want 400", r.status, r.body)
	}
	var held int64
	for i := 0; held+defaultMaxQty <= defaultBuyerCap; i++ {
		if r := hold(fmt.Sprint("h", i), defaultMaxQty); r.status != http.StatusOK {
			t.Fatalf("hold %d = %d %s", i, r.status, r.body)
		}
		held += defaultMaxQty
	}
	r := hold("one-more", defaultBuyerCap-held+1)
	if r.status != http.StatusConflict || !strings.Contains(r.body, `"over_allowance"`) {
		t.Errorf("hold past the buyer's allowance = %d %s, want 409 over_allowance", r.status, r.body)
	}
	if n := stockOf(t, inv, "s1"); n != stockguard.MaxQty/2-held {
		t.Errorf("stock %d, want %d", n, stockguard.MaxQty/2-held)
	}
	if r := do(t, "POST", api.admin.URL+"/buyers/alice/orders/h0/return", "", asAdmin); r.status != http.StatusOK {
		t.Fatalf("return h0 = %d %s", r.status, r.body)
	}
	if r := hold("after-return", defaultMaxQty); r.status != http.StatusOK {
		t.Errorf("hold after a return = %d %s, want 200", r.status, r.body)
	}
}

// Bodies a gateway could read differently from the service are refused
// before anything is taken.
func TestServer_strictBodies(t *testing.T) {
	api, inv := stocked(t, "s1", 100)
	api.register(t, "alice")
	json := map[string]string{"Content-Type": "application/json"}
	for _, tc := range []struct {
		name, body string
		headers    map[string]string
		status     int
	}{
		{"trailing garbage", `{"order_id": "a", "sku": "s1", "qty": 1} x`, json, 400},
		{"two objects", `{"order_id": "b", "sku": "s1", "qty": 1}{"order_id": "c", "sku": "s1", "qty": 1}`, json, 400},
		{"duplicate key", `{"order_id": "d", "sku": "s1", "qty": 1, "qty": 7}`, json, 400},
		{"case-variant key", `{"order_id": "e", "SKU": "s1", "qty": 1}`, json, 400},
		{"folded key", `{"order_id": "f", "ſku": "s1", "qty": 1}`, json, 400},
		{"text/plain", `{"order_id": "g", "sku": "s1", "qty": 1}`, map[string]string{"Content-Type": "text/plain"}, 415},
		{"no content type", `{"order_id": "h", "sku": "s1", "qty": 1}`, map[string]string{"Content-Type": ""}, 415},
		{"padded past 4 KiB", `{"order_id": "i", "sku": "s1", "qty": 1}` + strings.Repeat(" ", maxBody), json, 413},
		{"nested value", `{"order_id": "j", "sku": "s1", "qty": 1, "hold": {"x": 1}}`, json, 400},
	} {
		headers := asBuyer("alice")
		for k, v := range tc.headers {
			headers[k] = v
		}
		if r := do(t, "POST", api.public.URL+"/buy", tc.body, headers); r.status != tc.status {
			t.Errorf("%s: %d %s, want %d", tc.name, r.status, r.body, tc.status)
		}
	}
	if n := stockOf(t, inv, "s1"); n != 100 {
		t.Errorf("stock %d after refused bodies, want 100", n)
	}
}

// IDs and SKUs that print alike but differ, or differ in bytes but decode
// alike, are refused: invalid UTF-8 (which encoding/json would fold to
// U+FFFD), lone surrogates, bidi overrides, zero-width and other format
// characters.
func TestServer_rejectsAmbiguousText(t *testing.T) {
	api, inv := stocked(t, "s1", 100)
	api.register(t, "alice")
	for _, tc := range []struct{ name, body string }{
		{"invalid UTF-8 id", "{\"order_id\": \"u\xff\", \"sku\": \"s1\", \"qty\": 1}"},
		{"lone surrogate id", `{"order_id": "u\udc00", "sku": "s1", "qty": 1}`},
		{"replacement character id", `{"order_id": "u\ufffd", "sku": "s1", "qty": 1}`},
		{"bidi override id", `{"order_id": "a\u202eb", "sku": "s1", "qty": 1}`},
		{"zero-width id", `{"order_id": "a\u200bb", "sku": "s1", "qty": 1}`},
		{"bidi override sku", `{"order_id": "k", "sku": "s\u202e1", "qty": 1}`},
	} {
		if r := do(t, "POST", api.public.URL+"/buy", tc.body, asBuyer("alice")); r.status != http.StatusBadRequest {
			t.Errorf("%s: %d %s, want 400", tc.name, r.status, r.body)
		}
	}
	if r := do(t, "GET", api.public.URL+"/skus/s%E2%80%AE1", "", nil); r.status != http.StatusBadRequest {
		t.Errorf("GET of a SKU with a bidi override = %d %s, want 400", r.status, r.body)
	}
	if n := stockOf(t, inv, "s1"); n != 100 {
		t.Errorf("stock %d after refused IDs, want 100", n)
	}
}

// blockingOrders holds every Take until release is closed.
type blockingOrders struct {
	*memorders.Store
	entered chan struct{}
	release chan struct{}
}

func (b *blockingOrders) Take(ctx context.Context, id string, lines ...stockguard.Line) error {
	close(b.entered)
	<-b.release
	return b.Store.Take(ctx, id, lines...)
}

// A buy whose backend call outlasts the server's write timeout still gets
// its 200: the handler gives its reply a deadline of its own once the
// order is applied.
func TestServer_replyOutlivesWriteTimeout(t *testing.T) {
	inv := &blockingOrders{Store: memorders.New(), entered: make(chan struct{}), release: make(chan struct{})}
	if err := inv.SetStock(t.Context(), "s1", 10); err != nil {
		t.Fatal(err)
	}
	api := newAPI(t, inv)
	api.register(t, "alice")
	const writeTimeout = 50 * time.Millisecond
	ts := httptest.NewUnstartedServer(api.public.Config.Handler)
	ts.Config.WriteTimeout = writeTimeout
	ts.Start()
	t.Cleanup(ts.Close)
	go func() {
		<-inv.entered
		// Past the server's write deadline (a sleep only ever makes it
		// later), then let the order apply.
		time.Sleep(2 * writeTimeout)
		close(inv.release)
	}()
	req, err := http.NewRequestWithContext(t.Context(), "POST", ts.URL+"/buy", strings.NewReader(`{"order_id": "slow", "sku": "s1", "qty": 1}`))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(buyerHeader, mintToken("alice"))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("applied order's reply lost: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("slow buy = %d, want 200", resp.StatusCode)
	}
}

// failingWriter is a connection that breaks before the reply is out.
type failingWriter struct{ header http.Header }

func (f *failingWriter) Header() http.Header              { return f.header }
func (f *failingWriter) WriteHeader(int)                  {}
func (f *failingWriter) Write([]byte) (int, error)        { return 0, errors.New("broken pipe") }
func (f *failingWriter) FlushError() error                { return errors.New("broken pipe") }
func (f *failingWriter) SetWriteDeadline(time.Time) error { return nil }

// lockedBuffer is a log sink safe for concurrent use.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// An applied order whose 200 cannot be written is logged, with the order.
func TestServer_logsLostReply(t *testing.T) {
	api, inv := stocked(t, "s1", 10)
	api.register(t, "alice")
	var logs lockedBuffer
	api.srv.log = slog.New(slog.NewJSONHandler(&logs, nil))
	req := httptest.NewRequest("POST", "/buy", strings.NewReader(`{"order_id": "lost", "sku": "s1", "qty": 1}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(buyerHeader, mintToken("alice"))
	api.public.Config.Handler.ServeHTTP(&failingWriter{header: http.Header{}}, req)
	if n := stockOf(t, inv, "s1"); n != 9 {
		t.Fatalf("stock %d, want the order applied (9)", n)
	}
	if !strings.Contains(logs.String(), "reply lost") || !strings.Contains(logs.String(), `"order_id":"lost"`) {
		t.Errorf("no log of the lost reply for order lost:\n%s", logs.String())
	}
}

// otelhttp named the server after the client's Host header, so every
// distinct Host grew /metrics by a series: the server is named by its
// listen address, and /metrics is on the admin listener only.
func TestService_metricsIgnoreHostHeader(t *testing.T) {
	b := redisBackend(t)
	s := start(t, append([]string{"-strategy", "redis-atomic"}, b.args...)...)
	for i := range 20 {
		req, err := http.NewRequestWithContext(t.Context(), "GET", s.url+"/skus/x", nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Host = fmt.Sprintf("attacker-%d.example:%d", i, 1000+i)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	if r := do(t, "GET", s.url+"/metrics", "", nil); r.status != http.StatusNotFound {
		t.Errorf("/metrics on the public listener = %d, want 404", r.status)
	}
	r := do(t, "GET", s.metricsURL+"/metrics", "", nil)
	if r.status != http.StatusOK || !strings.Contains(r.body, "http_server_request_duration_seconds") {
		t.Fatalf("/metrics on the admin listener = %d, no http_server_request_duration_seconds", r.status)
	}
	if strings.Contains(r.body, "attacker-") || strings.Contains(r.body, `server_port="100`) {
		t.Errorf("a client's Host header is in the metrics:\n%s", grepLines(r.body, "attacker-"))
	}
}

func grepLines(s, sub string) string {
	var out []string
	for l := range strings.Lines(s) {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "")
}

// A configuration whose every call would fail, or that puts a secret on
// the command line, is refused at start with the flag named.
func TestService_refusesBadConfiguration(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"-op-timeout", "0"}, "-op-timeout"},
		{[]string{"-hold-ttl", "0"}, "-hold-ttl"},
		{[]string{"-max-qty", "0"}, "-max-qty"},
		{[]string{"-buyer-cap", "1"}, "-buyer-cap"},
	} {
		out, err := runBinary(t, append([]string{"-redis-addr", "127.0.0.1:1"}, tc.args...)...)
		if err == nil || !strings.Contains(out, tc.want) {
			t.Errorf("%v: exit %v, want a refusal naming %s:\n%s", tc.args, err, tc.want, out)
		}
	}
}

// The MySQL DSN, with its password, can come from the environment rather
// than a flag that shows in ps. (MySQL does not answer there: the service
// starts, not ready, and says where it tried.)
func TestService_mysqlDSNFromEnvironment(t *testing.T) {
	t.Setenv(envMySQLDSN, "seckill:secret@tcp(127.0.0.1:1)/env_dsn?timeout=1s")
	s := start(t, "-strategy", "mysql-atomic")
	if r := do(t, "GET", s.url+"/readyz", "", nil); r.status != http.StatusServiceUnavailable {
		t.Errorf("/readyz with MySQL unreachable = %d %s, want 503", r.status, r.body)
	}
	if out := s.log.String(); !strings.Contains(out, "127.0.0.1:1") || strings.Contains(out, "secret") {
		t.Errorf("want the log to name the DSN's 127.0.0.1:1, without its password:\n%s", out)
	}
}

// failingOrders is a backend that cannot serve, and says where and how
// in its errors, as the strategies do.
type failingOrders struct{ *memorders.Store }

var errBackend = fmt.Errorf("%w: redis 10.1.2.3:6379: EVALSHA on seckill:stock:{s1}: connection refused", stockguard.ErrUnavailable)

func (failingOrders) Take(context.Context, string, ...stockguard.Line) error { return errBackend }
func (failingOrders) Stock(context.Context, string) (int64, error)           { return 0, errBackend }

// Error bodies say what happened in the API's words; the backend's
// addresses and key layout go to the log only.
func TestServer_errorBodiesHideTheBackend(t *testing.T) {
	api := newAPI(t, failingOrders{memorders.New()})
	var logs lockedBuffer
	api.srv.log = slog.New(slog.NewJSONHandler(&logs, nil))
	for _, r := range []reply{
		do(t, "POST", api.public.URL+"/buy", `{"order_id": "o1", "sku": "s1", "qty": 1}`, asBuyer("alice")),
		do(t, "GET", api.public.URL+"/skus/s1", "", nil),
	} {
		if r.status != http.StatusServiceUnavailable || strings.Contains(r.body, "10.1.2.3") || strings.Contains(r.body, "seckill:") {
			t.Errorf("= %d %s, want 503 without the backend's address or keys", r.status, r.body)
		}
	}
	if !strings.Contains(logs.String(), "10.1.2.3") {
		t.Errorf("the backend's error is not in the log:\n%s", logs.String())
	}
}

// /healthz says the process serves; /readyz says its backends answer.
func TestServer_readiness(t *testing.T) {
	api := newAPI(t, memorders.New())
	down := errors.New("redis: connection refused")
	var mu sync.Mutex
	var err error
	api.srv.ready = func(context.Context) error {
		mu.Lock()
		defer mu.Unlock()
		return err
	}
	for _, url := range []string{api.public.URL, api.admin.URL} {
		if r := do(t, "GET", url+"/readyz", "", nil); r.status != http.StatusNoContent {
			t.Errorf("%s/readyz with the backend up = %d", url, r.status)
		}
	}
	mu.Lock()
	err = down
	mu.Unlock()
	for _, url := range []string{api.public.URL, api.admin.URL} {
		if r := do(t, "GET", url+"/readyz", "", nil); r.status != http.StatusServiceUnavailable || strings.Contains(r.body, "refused") {
			t.Errorf("%s/readyz with the backend down = %d %s, want 503 without the error", url, r.status, r.body)
		}
		if r := do(t, "GET", url+"/healthz", "", nil); r.status != http.StatusNoContent {
			t.Errorf("%s/healthz with the backend down = %d, want 204", url, r.status)
		}
	}
}
