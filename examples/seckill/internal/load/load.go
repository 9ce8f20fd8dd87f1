// Package load drives buy requests at seckill instances and audits the
// answers: the load test and cmd/loadgen share it.
package load

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// Config is one run: Requests buys of Qty units of SKU, spread round-robin
// over URLs by Concurrency workers, each buy under its own order ID.
type Config struct {
	URLs        []string
	SKU         string
	Qty         int64
	Requests    int
	Concurrency int
	OrderPrefix string // order IDs are OrderPrefix + the request number
}

// Result is what the buyers were told.
type Result struct {
	Status    map[int]int // responses by HTTP status
	Failed    int         // requests with no response (refused, reset)
	Acked     int64       // units of the buys answered 200
	Accepted  []string    // order IDs of the buys answered 200
	Elapsed   time.Duration
	latencies []time.Duration // of answered requests, sorted
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
	return fmt.Sprintf("%d requests in %v: %.0f req/s, p50 %v, p99 %v, status %v, no answer %d, units acknowledged %d",
		len(r.latencies)+r.Failed, r.Elapsed.Round(time.Millisecond), r.RPS(),
		r.Quantile(0.50).Round(time.Microsecond), r.Quantile(0.99).Round(time.Microsecond), r.Status, r.Failed, r.Acked)
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
	for range cfg.Concurrency {
		wg.Go(func() {
			var lat []time.Duration
			status := map[int]int{}
			var failed int
			var acked int64
			var accepted []string
			for {
				i := int(next.Add(1)) - 1
				if i >= cfg.Requests || ctx.Err() != nil {
					break
				}
				id := fmt.Sprintf("%s%d", cfg.OrderPrefix, i)
				body, _ := json.Marshal(map[string]any{"order_id": id, "sku": cfg.SKU, "qty": cfg.Qty})
				t0 := time.Now()
				code, err := Post(ctx, client, cfg.URLs[i%len(cfg.URLs)]+"/buy", body, nil)
				if err != nil {
					failed++
					continue
				}
				lat = append(lat, time.Since(t0))
				status[code]++
				if code == http.StatusOK {
					acked += cfg.Qty
					accepted = append(accepted, id)
				}
			}
			mu.Lock()
			defer mu.Unlock()
			res.latencies = append(res.latencies, lat...)
			for k, v := range status {
				res.Status[k] += v
			}
			res.Failed += failed
			res.Acked += acked
			res.Accepted = append(res.Accepted, accepted...)
		})
	}
	wg.Wait()
	res.Elapsed = time.Since(began)
	slices.Sort(res.latencies)
	return res
}

// Post sends body and decodes a JSON reply into out (when not nil),
// returning the status. An error means no answer.
func Post(ctx context.Context, client *http.Client, url string, body []byte, out any) (int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return 0, err
	}
	req.Header.Set("Content-Type", "application/json")
	return do(client, req, out)
}

// Get fetches url, decoding a JSON reply into out (when not nil).
func Get(ctx context.Context, client *http.Client, url string, out any) (int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, err
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

// SetStock stocks sku with qty units through url.
func SetStock(ctx context.Context, client *http.Client, url, token, sku string, qty int64) error {
	body, _ := json.Marshal(map[string]int64{"qty": qty})
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url+"/skus/"+sku+"/stock", bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+token)
	code, err := do(client, req, nil)
	if err == nil && code != http.StatusOK {
		err = fmt.Errorf("set stock: HTTP %d", code)
	}
	return err
}

// Stock reads sku's stock through url.
func Stock(ctx context.Context, client *http.Client, url, sku string) (int64, error) {
	var reply struct {
		Stock int64 `json:"stock"`
	}
	code, err := Get(ctx, client, url+"/skus/"+sku, &reply)
	if err == nil && code != http.StatusOK {
		err = fmt.Errorf("stock: HTTP %d", code)
	}
	return reply.Stock, err
}
