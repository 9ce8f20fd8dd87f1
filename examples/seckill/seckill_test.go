package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stockguard/stockguard/examples/seckill/internal/load"
	"github.com/stockguard/stockguard/internal/backends/backendstest"
)

// The load test builds the service, starts two copies on two loopback
// ports against one shared backend (as behind a load balancer), drives a
// few thousand concurrent buys across both, and audits what the buyers
// were told against the stock the backend lost.

func TestMain(m *testing.M) { backendstest.Main(m, removeBinary) }

var (
	binOnce sync.Once
	binDir  string
	binPath string
	binErr  error
)

// binary builds the service once per test binary.
func binary(t *testing.T) string {
	t.Helper()
	binOnce.Do(func() {
		if binDir, binErr = os.MkdirTemp("", "seckill-bin-*"); binErr != nil {
			return
		}
		binPath = filepath.Join(binDir, "seckill")
		out, err := exec.Command("go", "build", "-o", binPath, ".").CombinedOutput()
		if err != nil {
			binErr = fmt.Errorf("go build: %w\n%s", err, out)
		}
	})
	if binErr != nil {
		t.Fatal(binErr)
	}
	return binPath
}

func removeBinary() {
	if binDir != "" {
		os.RemoveAll(binDir)
	}
}

// service is one running copy of the service.
type service struct {
	url        string // the public listener (a consumer's only one)
	adminURL   string
	metricsURL string // the admin listener, a consumer's only one
	cmd        *exec.Cmd
	log        *syncBuffer
	done       chan error
}

// freeAddr returns a loopback address with a port free a moment ago.
func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// start runs the service with args on free loopback ports and waits
// until it answers. Cleanup stops it gracefully and fails the test when
// it did not exit cleanly.
func start(t *testing.T, args ...string) *service {
	t.Helper()
	s, err := launch(t, args...)
	if err != nil {
		t.Fatalf("service exited: %v\n%s", err, s.log)
	}
	return s
}

// launch is start for a service that may refuse to start: it returns the
// exit error, with the service (its log), when the process exits before it
// answers.
func launch(t *testing.T, args ...string) (*service, error) {
	t.Helper()
	addr, adminAddr := freeAddr(t), freeAddr(t)
	s := &service{url: "http://" + addr, adminURL: "http://" + adminAddr, metricsURL: "http://" + adminAddr, log: &syncBuffer{}, done: make(chan error, 1)}
	if slices.Contains(args, roleConsumer) {
		s.metricsURL = s.url
	}
	// No drain delay unless args give one: nothing reads /readyz here.
	s.cmd = exec.Command(binary(t), append([]string{"-addr", addr, "-admin-addr", adminAddr, "-drain-delay", "0"}, args...)...)
	s.cmd.Stderr = s.log
	s.cmd.Env = append(os.Environ(), envAdminToken+"="+testToken, envBuyerKey+"="+testBuyerKey)
	if err := s.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { s.done <- s.cmd.Wait() }()
	t.Cleanup(func() {
		if err := s.stop(); err != nil {
			t.Errorf("%s did not stop cleanly: %v\n%s", s.url, err, s.log)
		}
	})
	deadline := time.Now().Add(time.Minute) // a hang guard only: a loaded machine starts it late
	for {
		resp, err := http.Get(s.url + "/healthz")
		if err == nil {
			resp.Body.Close()
			return s, nil
		}
		select {
		case err := <-s.done:
			s.done <- err
			if err == nil {
				err = errors.New("exit status 0")
			}
			return s, err
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("service at %s not up: %v\n%s", s.url, err, s.log)
		}
	}
}

// stop sends SIGTERM and waits for the exit; nil means exit status 0.
func (s *service) stop() error {
	if s.cmd.ProcessState != nil {
		return nil
	}
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-s.done:
		s.done <- err
		return err
	case <-time.After(30 * time.Second):
		_ = s.cmd.Process.Kill()
		return errors.New("no exit 30s after SIGTERM")
	}
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

func randomHex(t *testing.T) string {
	var b [4]byte
	if _, err := rand.Read(b[:]); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b[:])
}

// backend is where a test's stock lives: the flags that point the service
// at it, and a direct read of a SKU's stock that bypasses the service.
type backend struct {
	args  []string
	stock func(t *testing.T, sku string) int64
}

func redisBackend(t *testing.T) backend {
	srv := backendstest.SharedRedis(t)
	rdb := srv.Client()
	t.Cleanup(func() { rdb.Close() })
	prefix := "seckilltest:" + randomHex(t) + ":"
	t.Cleanup(func() {
		keys, _ := rdb.Keys(context.Background(), prefix+"*").Result()
		if len(keys) > 0 {
			rdb.Del(context.Background(), keys...)
		}
	})
	return backend{
		args: append([]string{"-redis-addr", srv.Addr, "-redis-prefix", prefix}, acceptLoss...),
		stock: func(t *testing.T, sku string) int64 {
			n, err := rdb.Get(t.Context(), prefix+"stock:{"+sku+"}").Int64()
			if err != nil {
				t.Fatalf("redis stock of %q: %v", sku, err)
			}
			return n
		},
	}
}

func mysqlBackend(t *testing.T) backend {
	db := backendstest.DB(t)
	table := "seckill_" + randomHex(t)
	t.Cleanup(func() {
		var tables []string
		_ = db.Select(&tables, "SHOW TABLES LIKE ?", table+"%")
		for _, name := range tables {
			_, _ = db.Exec("DROP TABLE `" + name + "`")
		}
	})
	return backend{
		args: []string{"-mysql-dsn", backendstest.SharedMySQL(t).DSN, "-mysql-table", table},
		stock: func(t *testing.T, sku string) int64 {
			var n int64
			if err := db.Get(&n, "SELECT qty FROM `"+table+"` WHERE sku = ?", sku); err != nil {
				t.Fatalf("mysql stock of %q: %v", sku, err)
			}
			return n
		},
	}
}

// sale is one run: stock units, then requests buys of one unit each over
// both copies, by as many buyers as there are concurrent requests.
type sale struct {
	stock, requests, concurrency int
	noOrderID                    bool
}

// saleArgs are the flags of a service in a sale: an allowance that lets
// each buyer buy what it asks for.
var saleArgs = []string{"-buyer-cap", "100000"}

// runSale stocks a SKU through the first copy's admin API, registers the
// buyers, drives the buys and returns what the buyers were told and the
// units the backend lost (read from the backend, and checked against GET
// /skus/{sku} of the first copy, which stays up).
func runSale(t *testing.T, copies []*service, b backend, s sale) (load.Result, int64) {
	t.Helper()
	ctx := t.Context()
	client := load.NewClient(s.concurrency)
	const sku = "flash"
	if err := load.SetStock(ctx, client, copies[0].adminURL, testToken, sku, int64(s.stock)); err != nil {
		t.Fatal(err)
	}
	if err := load.Register(ctx, client, copies[0].adminURL, testToken, s.concurrency); err != nil {
		t.Fatal(err)
	}
	var urls []string
	for _, c := range copies {
		urls = append(urls, c.url)
	}
	res := load.Run(ctx, client, load.Config{
		URLs: urls, SKU: sku, Qty: 1, Requests: s.requests, Concurrency: s.concurrency,
		OrderPrefix: "order-" + randomHex(t) + "-", Buyers: s.concurrency, BuyerKey: testBuyerKey, NoOrderID: s.noOrderID,
	})
	t.Log(res)
	left := b.stock(t, sku)
	viaHTTP, err := load.Stock(ctx, client, urls[0], sku)
	if err != nil {
		t.Fatal(err)
	}
	if viaHTTP != left {
		t.Errorf("GET %s/skus/%s = %d, backend holds %d", urls[0], sku, viaHTTP, left)
	}
	return res, int64(s.stock) - left
}

func TestSeckill_twoProcesses(t *testing.T) {
	for _, tc := range []struct {
		strategy string
		backend  func(*testing.T) backend
	}{
		{"redis-atomic", redisBackend},
		{"mysql-batched", mysqlBackend},
	} {
		t.Run(tc.strategy, func(t *testing.T) {
			b := tc.backend(t)
			args := append(append([]string{"-strategy", tc.strategy}, saleArgs...), b.args...)
			a, c := start(t, args...), start(t, args...)
			s := sale{stock: 1000, requests: 3000, concurrency: 64}
			res, gone := runSale(t, []*service{a, c}, b, s)

			if res.Failed != 0 || res.Status[http.StatusOK]+res.Status[http.StatusConflict] != s.requests {
				t.Errorf("want every buy answered 200 or 409 sold out, got %v and %d unanswered", res.Status, res.Failed)
			}
			if res.Acked != gone {
				t.Errorf("units acknowledged %d != units gone %d", res.Acked, gone)
			}
			if gone != int64(s.stock) {
				t.Errorf("%d units gone of %d, with %d buyers for them", gone, s.stock, s.requests)
			}

			buys := metric(t, "stockguard_operations_total", isBuy, a, c)
			ok := metric(t, "stockguard_operations_total", func(l map[string]string) bool {
				return isBuy(l) && l["stockguard_outcome"] == "ok"
			}, a, c)
			if buys != float64(s.requests) || ok != float64(res.Status[http.StatusOK]) {
				t.Errorf("/metrics counts %v buys, %v ok; want %d, %d", buys, ok, s.requests, res.Status[http.StatusOK])
			}
		})
	}
}

// A sync.Mutex guards one process: two copies each let their own buyers
// through read-check-write, and two sales move the stock once.
func TestSeckill_mutexCounterexampleOversellsAcrossTwoProcesses(t *testing.T) {
	b := redisBackend(t)
	args := append([]string{"-strategy", counterexample, "-allow-oversell"}, b.args...)
	a, c := start(t, args...), start(t, args...)
	res, gone := runSale(t, []*service{a, c}, b, sale{stock: 200, requests: 3000, concurrency: 64, noOrderID: true})
	if res.Acked <= gone {
		t.Fatalf("acknowledged %d, gone %d: the two processes' mutexes did not oversell", res.Acked, gone)
	}
	t.Logf("oversold %d units: %d acknowledged, %d gone", res.Acked-gone, res.Acked, gone)
}

// SIGTERM to one copy mid-sale: it stops taking buys but answers every
// one in flight, so every unit it sold is acknowledged and nothing is
// lost.
func TestSeckill_shutdownMidSaleLosesNoAcknowledgedOrder(t *testing.T) {
	b := redisBackend(t)
	args := append(append([]string{"-strategy", "redis-atomic"}, saleArgs...), b.args...)
	a, c := start(t, args...), start(t, args...)
	stopped := make(chan error, 1)
	go func() {
		time.Sleep(150 * time.Millisecond)
		stopped <- c.stop()
	}()
	res, gone := runSale(t, []*service{a, c}, b, sale{stock: 100000, requests: 6000, concurrency: 64})
	if err := <-stopped; err != nil {
		t.Fatalf("graceful stop: %v\n%s", err, c.log)
	}
	if res.Failed == 0 {
		t.Fatalf("the stopped copy answered every buy: the sale ended before the SIGTERM, test shows nothing")
	}
	if res.Acked != gone {
		t.Errorf("units acknowledged %d != units gone %d", res.Acked, gone)
	}
	if !strings.Contains(c.log.String(), "every request answered") {
		t.Errorf("stopped copy did not report a clean shutdown:\n%s", c.log)
	}
}

func isBuy(l map[string]string) bool {
	op := l["stockguard_operation"]
	return op == "decrement" || op == "take"
}

// metric sums a Prometheus counter's samples whose labels match, over the
// services' /metrics (on their admin listeners).
func metric(t *testing.T, name string, match func(map[string]string) bool, services ...*service) float64 {
	t.Helper()
	var sum float64
	for _, s := range services {
		resp, err := http.Get(s.metricsURL + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			labels, value, ok := parseSample(sc.Text(), name)
			if ok && match(labels) {
				sum += value
			}
		}
		resp.Body.Close()
		if err := sc.Err(); err != nil {
			t.Fatal(err)
		}
	}
	return sum
}

// parseSample reads one line of the Prometheus text format,
// `name{k="v",...} value`, for the metric name. Label values here never
// hold commas or escaped quotes.
func parseSample(line, name string) (map[string]string, float64, bool) {
	rest, ok := strings.CutPrefix(line, name+"{")
	if !ok {
		return nil, 0, false
	}
	body, val, ok := strings.Cut(rest, "} ")
	if !ok {
		return nil, 0, false
	}
	v, err := strconv.ParseFloat(strings.TrimSpace(val), 64)
	if err != nil {
		return nil, 0, false
	}
	labels := map[string]string{}
	for _, kv := range strings.Split(body, ",") {
		k, v, _ := strings.Cut(kv, "=")
		labels[k] = strings.Trim(v, `"`)
	}
	return labels, v, true
}
