// Package load drives buy requests at seckill instances and audits the
// answers: the load test and cmd/loadgen share it.
package load

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// Config is one run: Requests buys of Qty units of SKU, spread round-robin
// over URLs by Concurrency workers, each buy under its own order ID, by
// Buyers buyers in turn.
type Config struct {
	URLs        []string
	SKU         string
	Qty         int64
	Requests    int
	Concurrency int
	OrderPrefix string // order IDs are OrderPrefix + the request number
	// Buyer i%Buyers makes buy i (Buyer names them), with a token
	// signed by BuyerKey.
	Buyers   int
	BuyerKey string
	// NoOrderID sends buys without an order ID: the counterexample's,
	// which keeps no orders.
	NoOrderID bool
	// Timeout bounds one attempt (0: the client's own). Retries is how
	// many times a buy is sent again, with the same order ID, after an
	// attempt with no answer (a timeout, a reset) or a 5xx.
	Timeout time.Duration
	Retries int
}

// Buyer names buyer i of a run.
func Buyer(i int) string { return fmt.Sprintf("buyer-%d", i) }

// TokenTTL is how long the tokens of a run are valid.
const TokenTTL = time.Hour

// Token is the buyer token of buyer under key, issued at issued and
// expiring at expires, as the shop's login issues it:
// <buyer>.<issued>.<expires> (Unix seconds) "." hex(HMAC-SHA256(key,
// <buyer>.<issued>.<expires>)).
func Token(key, buyer string, issued, expires time.Time) string {
	signed := buyer + "." + strconv.FormatInt(issued.Unix(), 10) + "." + strconv.FormatInt(expires.Unix(), 10)
	mac := hmac.New(sha256.New, []byte(key))
	mac.Write([]byte(signed))
	return signed + "." + hex.EncodeToString(mac.Sum(nil))
}

// Order is one buyer's order ID.
type Order struct{ Buyer, ID string }

// Result is what the buyers were told, by each buy's last answer.
type Result struct {
	Status    map[int]int // last answers by HTTP status
	Failed    int         // buys with no answer to any attempt
	Retried   int         // attempts sent again
	Acked     int64       // units of the buys answered 200
	Accepted  []Order     // the buys answered 200
	Unknown   []Order     // the buys with no answer to any attempt: taken or not
	Elapsed   time.Duration
	latencies []time.Duration // of answered buys, first attempt to last answer, sorted
}

// RPS is answered requests per second.
func (r Result) RPS() float64 { return float64(len(r.latencies)) / r.Elapsed.Seconds() }

// Quantile returns the latency below which a fraction q of answered
// requests fell.
func (r Result) Quantile(q float64) time.Duration {
	if len(r.latencies) == 0 {
		return 0
	}
	i := min(int(q*float64(len(r.latencies))), len(r.latencies)-1)
	return r.latencies[i]
}

func (r Result) String() string {
	return fmt.Sprintf("%d requests in %v: %.0f req/s, p50 %v, p99 %v, status %v, no answer %d, retried %d, units acknowledged %d",
		len(r.latencies)+r.Failed, r.Elapsed.Round(time.Millisecond), r.RPS(),
		r.Quantile(0.50).Round(time.Microsecond), r.Quantile(0.99).Round(time.Microsecond), r.Status, r.Failed, r.Retried, r.Acked)
}

// NewClient returns a client keeping enough idle connections for
// concurrency workers, so the run measures requests, not TCP handshakes.
func NewClient(concurrency int) *http.Client {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.MaxIdleConns = 2 * concurrency
	t.MaxIdleConnsPerHost = concurrency
	return &http.Client{Transport: t, Timeout: 30 * time.Second}
}

// Run drives cfg's buys and returns what they were told.
func Run(ctx context.Context, client *http.Client, cfg Config) Result {
	var (
		next  atomic.Int64
		mu    sync.Mutex
		res   = Result{Status: map[int]int{}}
		wg    sync.WaitGroup
		began = time.Now()
	)
	expires := began.Add(TokenTTL)
	buyers := max(cfg.Buyers, 1)
	for range cfg.Concurrency {
		wg.Go(func() {
			var (
				lat      []time.Duration
				status   = map[int]int{}
				failed   int
				retried  int
				acked    int64
				accepted []Order
				unknown  []Order
			)
			for {
				i := int(next.Add(1)) - 1
				if i >= cfg.Requests || ctx.Err() != nil {
					break
				}
				order := Order{Buyer: Buyer(i % buyers), ID: fmt.Sprintf("%s%d", cfg.OrderPrefix, i)}
				buy := map[string]any{"order_id": order.ID, "sku": cfg.SKU, "qty": cfg.Qty}
				if cfg.NoOrderID {
					delete(buy, "order_id")
				}
				body, _ := json.Marshal(buy)
				headers := map[string]string{BuyerHeader: Token(cfg.BuyerKey, order.Buyer, began, expires)}
				t0 := time.Now()
				code, err := attempt(ctx, client, cfg, cfg.URLs[i%len(cfg.URLs)]+"/buy", body, headers)
				// The same buy again, at the next copy: a timeout or a 5xx
				// leaves the outcome open, and the order ID makes the retry
				// take nothing twice.
				for try := 1; try <= cfg.Retries && (err != nil || code >= 500) && ctx.Err() == nil; try++ {
					retried++
					code, err = attempt(ctx, client, cfg, cfg.URLs[(i+try)%len(cfg.URLs)]+"/buy", body, headers)
				}
				if err != nil {
					failed++
					unknown = append(unknown, order)
					continue
				}
				lat = append(lat, time.Since(t0))
				status[code]++
				if code == http.StatusOK {
					acked += cfg.Qty
					accepted = append(accepted, order)
				}
			}
			mu.Lock()
			defer mu.Unlock()
			res.latencies = append(res.latencies, lat...)
			for k, v := range status {
				res.Status[k] += v
			}
			res.Failed += failed
			res.Retried += retried
			res.Acked += acked
			res.Accepted = append(res.Accepted, accepted...)
			res.Unknown = append(res.Unknown, unknown...)
		})
	}
	wg.Wait()
	res.Elapsed = time.Since(began)
	slices.Sort(res.latencies)
	return res
}

// BuyerHeader carries the buyer token.
const BuyerHeader = "Seckill-Buyer"

// attempt sends one buy, bounded by cfg.Timeout.
func attempt(ctx context.Context, client *http.Client, cfg Config, url string, body []byte, headers map[string]string) (int, error) {
	if cfg.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, cfg.Timeout)
		defer cancel()
	}
	return Post(ctx, client, url, body, headers, nil)
}

// Post sends body with headers and decodes a JSON reply into out (when
// not nil), returning the status. An error means no answer.
func Post(ctx context.Context, client *http.Client, url string, body []byte, headers map[string]string, out any) (int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return 0, err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	return do(client, req, out)
}

// Get fetches url, with the admin token when token is not empty,
// decoding a JSON reply into out (when not nil).
func Get(ctx context.Context, client *http.Client, url, token string, out any) (int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, err
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	return do(client, req, out)
}

func do(client *http.Client, req *http.Request, out any) (int, error) {
	resp, err := client.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	if out != nil && resp.StatusCode == http.StatusOK {
		if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
			return resp.StatusCode, err
		}
	}
	_, _ = io.Copy(io.Discard, resp.Body) // drain, so the connection is reused
	return resp.StatusCode, nil
}

// SetStock sets sku's level to qty units through the admin API at
// adminURL, overwriting the level of a SKU already stocked.
func SetStock(ctx context.Context, client *http.Client, adminURL, token, sku string, qty int64) error {
	body, _ := json.Marshal(map[string]any{"qty": qty, "overwrite": true})
	code, err := Post(ctx, client, adminURL+"/skus/"+sku+"/stock", body, map[string]string{"Authorization": "Bearer " + token}, nil)
	if err == nil && code != http.StatusOK {
		err = fmt.Errorf("set stock: HTTP %d", code)
	}
	return err
}

// Register gives the first n buyers of a run (Buyer) their allowance
// through the admin API at adminURL.
func Register(ctx context.Context, client *http.Client, adminURL, token string, n int) error {
	for i := range max(n, 1) {
		code, err := Post(ctx, client, adminURL+"/buyers/"+Buyer(i), nil, map[string]string{"Authorization": "Bearer " + token}, nil)
		if err == nil && code != http.StatusOK {
			err = fmt.Errorf("register %s: HTTP %d", Buyer(i), code)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// Stock reads sku's stock through url.
func Stock(ctx context.Context, client *http.Client, url, sku string) (int64, error) {
	var reply struct {
		Stock int64 `json:"stock"`
	}
	code, err := Get(ctx, client, url+"/skus/"+sku, "", &reply)
	if err == nil && code != http.StatusOK {
		err = fmt.Errorf("stock: HTTP %d", code)
	}
	return reply.Stock, err
}
