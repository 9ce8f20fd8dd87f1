package main

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stockguard/stockguard"
)

// testBuyerKey is the buyer-token key of the test servers.
const testBuyerKey = "test-buyer-key-0123456789abcdef-0123"

// testAPI is one service under test, reached through its two listeners.
type testAPI struct {
	srv           *server
	public, admin *httptest.Server
}

func newAPI(t *testing.T, inv stockguard.Inventory) *testAPI {
	s := newServer(t, inv)
	public, admin := httptest.NewServer(s.publicRoutes()), httptest.NewServer(s.adminRoutes(http.NotFoundHandler()))
	t.Cleanup(public.Close)
	t.Cleanup(admin.Close)
	return &testAPI{srv: s, public: public, admin: admin}
}

// mintToken is a buyer token valid for an hour, as the shop's login
// issues it.
func mintToken(buyer string) string {
	return mintTokenAt(buyer, time.Now(), time.Now().Add(time.Hour))
}

// mintTokenAt is a buyer token issued at issued that expires at expires,
// computed here independently of the service's code.
func mintTokenAt(buyer string, issued, expires time.Time) string {
	signed := fmt.Sprintf("%s.%d.%d", buyer, issued.Unix(), expires.Unix())
	mac := hmac.New(sha256.New, []byte(testBuyerKey))
	mac.Write([]byte(signed))
	return signed + "." + hex.EncodeToString(mac.Sum(nil))
}

type reply struct {
	status int
	header http.Header
	body   string
}

// do sends one request with the given headers ("Content-Type:
// application/json" unless headers set another or an empty one).
func do(t *testing.T, method, url, body string, headers map[string]string) reply {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	for k, v := range headers {
		if v == "" {
			req.Header.Del(k)
			continue
		}
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	return reply{status: resp.StatusCode, header: resp.Header, body: string(raw)}
}

func asBuyer(buyer string) map[string]string {
	return map[string]string{buyerHeader: mintToken(buyer)}
}

var asAdmin = map[string]string{"Authorization": "Bearer " + testToken}

// stockOf reads a SKU's level straight from the inventory.
func stockOf(t *testing.T, inv stockguard.Inventory, sku string) int64 {
	t.Helper()
	n, err := inv.Stock(t.Context(), sku)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// register gives buyer its allowance.
func (a *testAPI) register(t *testing.T, buyer string) {
	t.Helper()
	if r := do(t, "POST", a.admin.URL+"/buyers/"+buyer, "", asAdmin); r.status != http.StatusOK {
		t.Fatalf("register %s = %d %s", buyer, r.status, r.body)
	}
}
