package main

import (
	"encoding/json"
	"log/slog"
	"net/http"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/stockguard/stockguard"
	"github.com/stockguard/stockguard/internal/memorders"
)

// Stocking a SKU, registering a buyer, confirming and returning an
// order are the shop's, not the buyer's: they need the admin token, and
// a refused call is logged.
func TestServer_adminNeedsToken(t *testing.T) {
	api := newAPI(t, memorders.New())
	var logs lockedBuffer
	api.srv.log = slog.New(slog.NewJSONHandler(&logs, nil))
	if r := do(t, "POST", api.admin.URL+"/skus/s1/stock", `{"qty": 5}`, asAdmin); r.status != 200 {
		t.Fatalf("stock with the token = %d", r.status)
	}
	api.register(t, "alice")
	for _, id := range []string{"o1", "o2"} {
		if r := do(t, "POST", api.public.URL+"/buy", `{"order_id": "`+id+`", "sku": "s1", "qty": 1, "hold": true}`, asBuyer("alice")); r.status != 200 {
			t.Fatalf("buy %s = %d %s", id, r.status, r.body)
		}
	}
	for _, tc := range []struct{ method, path, body string }{
		{"POST", "/skus/s1/stock", `{"qty": 100}`},
		{"POST", "/buyers/mallory", ""},
		{"GET", "/buyers/alice/orders/o1", ""},
		{"POST", "/buyers/alice/orders/o1/return", ""},
		{"POST", "/buyers/alice/orders/o1/confirm", ""},
	} {
		for _, headers := range []map[string]string{nil, {"Authorization": "Bearer wrong"}, asBuyer("alice")} {
			if r := do(t, tc.method, api.admin.URL+tc.path, tc.body, headers); r.status != http.StatusUnauthorized || !strings.Contains(r.body, `"unauthorized"`) {
				t.Errorf("%s %s with %v = %d %s, want 401 unauthorized", tc.method, tc.path, headers, r.status, r.body)
			}
		}
	}
	if got := strings.Count(logs.String(), `"msg":"admin call refused"`); got != 15 {
		t.Errorf("%d refusals logged, want 15:\n%s", got, logs.String())
	}
	if r := do(t, "GET", api.public.URL+"/skus/s1", "", nil); r.status != 200 {
		t.Errorf("stock read without a token = %d", r.status)
	}
	if r := do(t, "POST", api.admin.URL+"/buyers/alice/orders/o1/return", "", asAdmin); r.status != 200 {
		t.Errorf("return with the token = %d", r.status)
	}
	if !strings.Contains(logs.String(), `"msg":"admin call","method":"POST","path":"/buyers/alice/orders/o1/return"`) {
		t.Errorf("the return is not in the audit log:\n%s", logs.String())
	}
}

// With no token configured, administration is off, not open.
func TestServer_adminOffWithoutToken(t *testing.T) {
	api := newAPI(t, memorders.New())
	api.srv.adminToken = ""
	if r := do(t, "POST", api.admin.URL+"/skus/s1/stock", `{"qty": 5}`, nil); r.status != http.StatusForbidden || !strings.Contains(r.body, `"admin_disabled"`) {
		t.Errorf("stock with administration off = %d %s, want 403 admin_disabled", r.status, r.body)
	}
}

// Every error about an order carries the client's order ID, so the buyer
// can ask about it or retry with it.
func TestServer_errorsCarryOrderID(t *testing.T) {
	api := newAPI(t, memorders.New())
	api.register(t, "alice")
	do(t, "POST", api.admin.URL+"/skus/s1/stock", `{"qty": 1}`, asAdmin)
	for _, tc := range []struct {
		url, method, path, body string
		status                  int
		id                      string
	}{
		{api.public.URL, "POST", "/buy", `{"order_id": "o8", "sku": "s1", "qty": 2}`, 409, "o8"},
		{api.public.URL, "POST", "/buy", `{"order_id": "o9", "sku": "never", "qty": 1}`, 404, "o9"},
		{api.public.URL, "GET", "/orders/nope", "", 404, "nope"},
		{api.admin.URL, "POST", "/buyers/alice/orders/nope/return", "", 404, "nope"},
	} {
		headers := asBuyer("alice")
		if tc.url == api.admin.URL {
			headers = asAdmin
		}
		r := do(t, tc.method, tc.url+tc.path, tc.body, headers)
		var e errorBody
		_ = json.Unmarshal([]byte(r.body), &e)
		if r.status != tc.status || e.OrderID != tc.id {
			t.Errorf("%s %s %s = %d %s, want %d with order_id %q", tc.method, tc.path, tc.body, r.status, r.body, tc.status, tc.id)
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
		if name == counterexample {
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

// A strategy marked orders is built as a stockguard.Orders, and one not
// marked is not: the mark decides whether the service starts on it.
func TestStrategies_ordersMarkMatchesTheInventory(t *testing.T) {
	for name, spec := range strategies {
		inv, err := spec.build(nil, nil, config{table: "stock", prefix: "p:"})
		if err != nil {
			t.Fatalf("-strategy %s: %v", name, err)
		}
		_, isOrders := inv.(stockguard.Orders)
		if isOrders != spec.orders {
			t.Errorf("-strategy %s: marked orders %v, builds an Orders %v", name, spec.orders, isOrders)
		}
	}
}
