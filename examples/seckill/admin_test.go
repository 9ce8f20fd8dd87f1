package main

import (
	"encoding/json"
	"io"
	"net/http"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/stockguard/stockguard/internal/memorders"
)

// call sends one request, with the admin token when token is not empty,
// and returns the status and the decoded error body.
func call(t *testing.T, method, url, body, token string) (int, errorBody) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	var e errorBody
	_ = json.Unmarshal(raw, &e)
	return resp.StatusCode, e
}

// Stocking a SKU, confirming and returning an order are the shop's, not
// the buyer's: they need the admin token; buying and reading do not.
func TestServer_adminNeedsToken(t *testing.T) {
	ts := newTestServer(t, memorders.New())
	if status, _ := call(t, "POST", ts.URL+"/skus/s1/stock", `{"qty": 5}`, testToken); status != 200 {
		t.Fatalf("stock with the token = %d", status)
	}
	for _, id := range []string{"o1", "o2"} {
		if status, _ := call(t, "POST", ts.URL+"/buy", `{"order_id": "`+id+`", "sku": "s1", "qty": 1, "hold": true}`, ""); status != 200 {
			t.Fatalf("buy %s without a token = %d", id, status)
		}
	}
	for _, tc := range []struct{ method, path, body string }{
		{"POST", "/skus/s1/stock", `{"qty": 100}`},
		{"POST", "/orders/o1/return", ""},
		{"POST", "/orders/o1/confirm", ""},
	} {
		for _, token := range []string{"", "wrong"} {
			if status, e := call(t, tc.method, ts.URL+tc.path, tc.body, token); status != http.StatusUnauthorized || e.Code != "unauthorized" {
				t.Errorf("%s %s with token %q = %d %q, want 401 unauthorized", tc.method, tc.path, token, status, e.Code)
			}
		}
	}
	if status, _ := call(t, "GET", ts.URL+"/skus/s1", "", ""); status != 200 {
		t.Errorf("stock read without a token = %d", status)
	}
	if status, _ := call(t, "POST", ts.URL+"/orders/o1/return", "", testToken); status != 200 {
		t.Errorf("return with the token = %d", status)
	}
}

// With no token configured, administration is off, not open.
func TestServer_adminOffWithoutToken(t *testing.T) {
	s := newServer(t, memorders.New())
	s.adminToken = ""
	ts := serve(t, s)
	if status, e := call(t, "POST", ts.URL+"/skus/s1/stock", `{"qty": 5}`, ""); status != http.StatusForbidden || e.Code != "admin_disabled" {
		t.Errorf("stock with administration off = %d %q, want 403 admin_disabled", status, e.Code)
	}
}

// Every error about an order carries its ID, the one the service made up
// included, so the buyer can ask about it or retry with it.
func TestServer_errorsCarryOrderID(t *testing.T) {
	ts := newTestServer(t, memorders.New())
	call(t, "POST", ts.URL+"/skus/s1/stock", `{"qty": 1}`, testToken)
	for _, tc := range []struct {
		method, path, body string
		status             int
		id                 string // "" : any non-empty ID (made up by the service)
	}{
		{"POST", "/buy", `{"sku": "never", "qty": 1}`, 404, ""},
		{"POST", "/buy", `{"sku": "s1", "qty": 2}`, 409, ""},
		{"POST", "/buy", `{"order_id": "o9", "sku": "never", "qty": 1}`, 404, "o9"},
		{"GET", "/orders/nope", "", 404, "nope"},
		{"POST", "/orders/nope/return", "", 404, "nope"},
	} {
		status, e := call(t, tc.method, ts.URL+tc.path, tc.body, testToken)
		if status != tc.status || e.OrderID == "" || tc.id != "" && e.OrderID != tc.id {
			t.Errorf("%s %s %s = %d order_id %q, want %d with order_id %q", tc.method, tc.path, tc.body, status, e.OrderID, tc.status, tc.id)
		}
	}
}

// The -strategy names are the harness's (stockbench -strategies), so one
// name means one thing across the repository. The harness registers its
// targets in ../../bench/*targets/register.go (read as text: importing
// bench would bring its chart libraries into this module).
func TestStrategies_namedAsTheHarness(t *testing.T) {
	var registered []byte
	for _, p := range []string{"../../bench/mysqltargets/register.go", "../../bench/redistargets/register.go", "../../bench/tieredtargets/register.go"} {
		raw, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		registered = append(registered, raw...)
	}
	for name := range strategies {
		if name == "mutex-counterexample" {
			continue
		}
		if !strings.Contains(string(registered), `"`+name+`"`) {
			t.Errorf("-strategy %s is no harness target name", name)
		}
	}
}

// README.md names the strategies the service has.
func TestReadme_namesTheStrategies(t *testing.T) {
	raw, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	line := regexp.MustCompile("Strategies \\(`-strategy`\\)[^:]*:((?s).*?)\\.\n\n").FindSubmatch(raw)
	if line == nil {
		t.Fatal("README.md lists no strategies")
	}
	for _, m := range regexp.MustCompile("`([a-z-]+)`").FindAllSubmatch(line[1], -1) {
		if _, ok := strategies[string(m[1])]; !ok {
			t.Errorf("README.md names -strategy %s, which the service does not have", m[1])
		}
	}
}

var goRunService = regexp.MustCompile(`go run \.(\s|$)`)

// The documented way to start the service runs the binary itself, so
// that a signal reaches the service (go run would take it and leave the
// service running).
func TestReadme_startsTheBinary(t *testing.T) {
	raw, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	starts := 0
	for _, l := range strings.Split(string(raw), "\n") {
		if goRunService.MatchString(l) {
			t.Errorf("README.md starts the service with go run: %s", l)
		}
		if strings.HasPrefix(strings.TrimSpace(l), "./seckill ") || strings.Contains(l, " ./seckill ") {
			starts++
		}
	}
	if starts == 0 {
		t.Error("README.md never starts ./seckill")
	}
}
