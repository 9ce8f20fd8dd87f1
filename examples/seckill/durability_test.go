package main

import (
	"context"
	"net/http"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stockguard/stockguard/internal/backends/backendstest"
)

// Redis as redis-server runs without a config file: RDB snapshots, no
// append-only file.
var redisDefaults = []string{"--save", "3600 1 300 100 60 10000", "--appendonly", "no"}

// redisDurable is a Redis that fsyncs every write before it answers.
var redisFsyncAlways = []string{"--appendonly", "yes", "--appendfsync", "always"}

// acceptLoss are the flags of a test service on a Redis that keeps nothing
// on disk (the shared test server), where losing orders is accepted.
var acceptLoss = []string{"-accept-redis-loss", acceptAny}

// On Redis's default settings, an order acknowledged after the last
// snapshot is gone when Redis restarts, and its unit is sold again: the
// service refuses such a Redis at start, before it sells anything.
func TestService_refusesRedisOnDefaultSettings(t *testing.T) {
	r := backendstest.PrivateRedis(t, 1, redisDefaults...)[0]
	s, err := launch(t, "-strategy", "redis-atomic", "-redis-addr", r.Addr)
	if err == nil {
		t.Fatalf("the service started on a Redis running appendonly no, which loses acknowledged orders in a restart")
	}
	if log := s.log.String(); !strings.Contains(log, "appendonly no") || !strings.Contains(log, "-accept-redis-loss") {
		t.Errorf("exit %v without naming appendonly and -accept-redis-loss:\n%s", err, log)
	}
	// The operator who accepts the loss says so.
	start(t, "-strategy", "redis-atomic", "-redis-addr", r.Addr, "-accept-redis-loss", acceptAny)
}

// A Redis that crashes and comes back on its default settings (started
// without its config file) from an older snapshot: the service refuses to
// sell on it, and says so on /readyz, rather than sell alice's unit to bob
// again.
func TestService_refusesRedisRestartedOnDefaultSettings(t *testing.T) {
	r := backendstest.PrivateRedis(t, 1, redisFsyncAlways...)[0]
	rdb := r.Client()
	t.Cleanup(func() { rdb.Close() })
	s := start(t, "-strategy", "redis-atomic", "-redis-addr", r.Addr)
	for _, step := range []struct{ path, body string }{{"/skus/flash/stock", `{"qty": 1}`}, {"/buyers/alice", ""}, {"/buyers/bob", ""}} {
		if r := do(t, "POST", s.adminURL+step.path, step.body, asAdmin); r.status != http.StatusOK {
			t.Fatalf("POST %s = %d %s", step.path, r.status, r.body)
		}
	}
	if err := rdb.Save(t.Context()).Err(); err != nil { // the snapshot the restart will come back from
		t.Fatal(err)
	}
	if r := do(t, "POST", s.url+"/buy", `{"order_id": "a1", "sku": "flash", "qty": 1}`, asBuyer("alice")); r.status != http.StatusOK {
		t.Fatalf("alice's buy = %d %s", r.status, r.body)
	}
	if r := do(t, "GET", s.url+"/readyz", "", nil); r.status != http.StatusNoContent {
		t.Fatalf("/readyz on a Redis with appendfsync always = %d %s", r.status, r.body)
	}

	if err := r.Proc.Kill(); err != nil {
		t.Fatal(err)
	}
	r.Proc.Args = append(slices.Clone(r.Proc.Args[:len(r.Proc.Args)-len(redisFsyncAlways)]), redisDefaults...)
	if err := r.Proc.Respawn(t.Context(), func(ctx context.Context) error { return rdb.Ping(ctx).Err() }); err != nil {
		t.Fatal(err)
	}
	if n, err := rdb.Get(t.Context(), "seckill:stock:{flash}").Int64(); err != nil || n != 1 {
		t.Fatalf("after the restart Redis holds %d units of flash (%v), want the snapshot's 1", n, err)
	}

	if r := do(t, "POST", s.url+"/buy", `{"order_id": "b1", "sku": "flash", "qty": 1}`, asBuyer("bob")); r.status != http.StatusServiceUnavailable {
		t.Errorf("bob's buy of the unit alice has = %d %s, want 503", r.status, r.body)
	}
	if r := do(t, "GET", s.url+"/orders/a1", "", asBuyer("alice")); r.status != http.StatusServiceUnavailable {
		t.Errorf("alice's order = %d %s, want 503 (not an answer from a Redis that lost it)", r.status, r.body)
	}
	for _, url := range []string{s.url, s.adminURL} {
		if r := do(t, "GET", url+"/readyz", "", nil); r.status != http.StatusServiceUnavailable {
			t.Errorf("%s/readyz = %d %s, want 503", url, r.status, r.body)
		}
	}
	if !strings.Contains(s.log.String(), "appendonly no") {
		t.Errorf("the refusal's reason is not in the log:\n%s", s.log)
	}
}

// -op-timeout bounds every Redis call: with Redis stopped, a buy, a stock
// read and /readyz answer about when it passes, not after go-redis's own
// 5 s socket timeouts. (The bound below is generous: it only has to tell
// 200 ms from 5 s.) A 5xx: the buy may have been sent to Redis, which
// would apply it when it resumes (500 outcome_unknown), or not (503).
func TestService_opTimeoutBoundsRedisCalls(t *testing.T) {
	r := backendstest.PrivateRedis(t, 1)[0]
	const opTimeout = 200 * time.Millisecond
	s := start(t, append([]string{"-strategy", "redis-atomic", "-redis-addr", r.Addr, "-op-timeout", opTimeout.String()}, acceptLoss...)...)
	for _, step := range []struct{ path, body string }{{"/skus/flash/stock", `{"qty": 10}`}, {"/buyers/alice", ""}} {
		if r := do(t, "POST", s.adminURL+step.path, step.body, asAdmin); r.status != http.StatusOK {
			t.Fatalf("POST %s = %d %s", step.path, r.status, r.body)
		}
	}
	if err := r.Proc.Pause(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Proc.Resume() })
	for _, tc := range []struct {
		method, path, body string
		headers            map[string]string
	}{
		{"POST", "/buy", `{"order_id": "o1", "sku": "flash", "qty": 1}`, asBuyer("alice")},
		{"GET", "/skus/flash", "", nil},
		{"GET", "/readyz", "", nil},
	} {
		began := time.Now()
		r := do(t, tc.method, s.url+tc.path, tc.body, tc.headers)
		if took := time.Since(began); r.status != http.StatusInternalServerError && r.status != http.StatusServiceUnavailable || took > 3*time.Second {
			t.Errorf("%s %s with Redis stopped = %d %s after %v, want a 5xx about -op-timeout %v", tc.method, tc.path, r.status, r.body, took, opTimeout)
		}
	}
}

// On SIGTERM the service first drains: /readyz answers 503 draining while
// the listeners still serve, for -drain-delay (a second signal ends it),
// then it stops as before.
func TestService_drainsBeforeClosing(t *testing.T) {
	b := redisBackend(t)
	s := start(t, append([]string{"-strategy", "redis-atomic", "-drain-delay", "10m"}, b.args...)...)
	if r := do(t, "GET", s.url+"/readyz", "", nil); r.status != http.StatusNoContent {
		t.Fatalf("/readyz before SIGTERM = %d %s", r.status, r.body)
	}
	if err := s.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(20 * time.Millisecond) { // a hang guard only
		r := do(t, "GET", s.url+"/readyz", "", nil)
		if r.status == http.StatusServiceUnavailable && strings.Contains(r.body, `"draining"`) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("/readyz after SIGTERM = %d %s, want 503 draining", r.status, r.body)
		}
	}
	if r := do(t, "GET", s.url+"/skus/none", "", nil); r.status != http.StatusNotFound {
		t.Errorf("a request while draining = %d %s, want it served (404 unknown_sku)", r.status, r.body)
	}
	if err := s.stop(); err != nil { // the second signal
		t.Fatalf("stop while draining: %v\n%s", err, s.log)
	}
}

// A service started while Redis is down serves (503, not ready) and is
// ready, and sells, once Redis is back.
func TestService_startsWhileRedisIsDown(t *testing.T) {
	r := backendstest.PrivateRedis(t, 1, redisFsyncAlways...)[0]
	if err := r.Proc.Kill(); err != nil {
		t.Fatal(err)
	}
	s := start(t, "-strategy", "redis-atomic", "-redis-addr", r.Addr)
	if r := do(t, "GET", s.url+"/readyz", "", nil); r.status != http.StatusServiceUnavailable {
		t.Errorf("/readyz with Redis down = %d %s, want 503", r.status, r.body)
	}
	rdb := r.Client()
	t.Cleanup(func() { rdb.Close() })
	if err := r.Proc.Respawn(t.Context(), func(ctx context.Context) error { return rdb.Ping(ctx).Err() }); err != nil {
		t.Fatal(err)
	}
	if r := do(t, "GET", s.url+"/readyz", "", nil); r.status != http.StatusNoContent {
		t.Errorf("/readyz with Redis back = %d %s, want 204", r.status, r.body)
	}
	for _, step := range []struct{ path, body string }{{"/skus/flash/stock", `{"qty": 1}`}, {"/buyers/alice", ""}} {
		if r := do(t, "POST", s.adminURL+step.path, step.body, asAdmin); r.status != http.StatusOK {
			t.Errorf("POST %s with Redis back = %d %s", step.path, r.status, r.body)
		}
	}
	if r := do(t, "POST", s.url+"/buy", `{"order_id": "a1", "sku": "flash", "qty": 1}`, asBuyer("alice")); r.status != http.StatusOK {
		t.Errorf("a buy with Redis back = %d %s", r.status, r.body)
	}
}
