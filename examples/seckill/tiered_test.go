package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/stockguard/stockguard"
	"github.com/stockguard/stockguard/examples/seckill/internal/load"
	"github.com/stockguard/stockguard/internal/backends/backendstest"
	"github.com/stockguard/stockguard/mysqllock"
	"github.com/stockguard/stockguard/strategy"
	"github.com/stockguard/stockguard/tiered"
)

// TestSeckill_tieredTwoServicesAndConsumers: two copies of the service
// with -strategy tiered-mysql sell through Redis — one with -consume=false,
// the other running a consumer in the service (the default) — while a
// consumer process (-role consumer) writes the orders to MySQL too. Mid-sale
// the consumer gets SIGTERM: it finishes its batch, acknowledges it
// (nothing left pending under its name) and exits 0; a second consumer
// process joins. After the drain every order answered 200 is on the
// back exactly once with its line, no other order is, the back's level is
// the front's, and the consumers' /metrics count what they applied.
func TestSeckill_tieredTwoServicesAndConsumers(t *testing.T) {
	db := backendstest.DB(t)
	rdb := backendstest.SharedRedis(t).Client()
	t.Cleanup(func() { rdb.Close() })
	suffix := randomHex(t)
	table, prefix := "seckill_"+suffix, "seckilltest:"+suffix+":"
	t.Cleanup(func() {
		var tables []string
		_ = db.Select(&tables, "SHOW TABLES LIKE ?", table+"%")
		for _, name := range tables {
			_, _ = db.Exec("DROP TABLE `" + name + "`")
		}
		keys, _ := rdb.Keys(context.Background(), prefix+"*").Result()
		if len(keys) > 0 {
			rdb.Del(context.Background(), keys...)
		}
	})
	backArgs := []string{"-mysql-dsn", backendstest.SharedMySQL(t).DSN, "-mysql-table", table,
		"-redis-addr", backendstest.SharedRedis(t).Addr, "-redis-prefix", prefix}
	serviceArgs := append(append(append([]string{"-strategy", tieredStrategy, "-setup-front"}, saleArgs...), backArgs...), acceptLoss...)
	a, b := start(t, append(serviceArgs, "-consume=false")...), start(t, serviceArgs...)
	consumer := func(name string) *service {
		return start(t, append([]string{"-role", roleConsumer, "-consumer-name", name, "-claim-idle", "500ms"}, backArgs...)...)
	}
	first := consumer("consumer-1")

	stream := tiered.StreamKey(prefix)
	stopped := make(chan error, 1)
	go func() {
		// Stop it while it has work: once it has applied some entries
		// (or after 20 s, and the test fails below).
		for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
			if n, _ := scrape(first, "tiered_consumer_applied_total"); n > 0 {
				break
			}
		}
		stopped <- first.stop()
	}()

	const sku, stock, requests = "flash", 1000, 3000
	client := load.NewClient(64)
	ctx := t.Context()
	if err := load.SetStock(ctx, client, a.adminURL, testToken, sku, stock); err != nil {
		t.Fatal(err)
	}
	const buyers = 64
	if err := load.Register(ctx, client, a.adminURL, testToken, buyers); err != nil {
		t.Fatal(err)
	}
	orderPrefix := "order-" + randomHex(t) + "-"
	res := load.Run(ctx, client, load.Config{URLs: []string{a.url, b.url}, SKU: sku, Qty: 1, Requests: requests, Concurrency: 64,
		OrderPrefix: orderPrefix, Buyers: buyers, BuyerKey: testBuyerKey})
	t.Log(res)
	if err := <-stopped; err != nil {
		t.Fatalf("consumer-1 on SIGTERM: %v\n%s", err, first.log)
	}
	held, err := rdb.XPendingExt(ctx, &redis.XPendingExtArgs{Stream: stream, Group: tiered.DefaultGroup, Start: "-", End: "+", Count: 100000, Consumer: "consumer-1"}).Result()
	if err != nil || len(held) != 0 {
		t.Errorf("consumer-1 left %d entries unacknowledged (%v)", len(held), err)
	}
	second := consumer("consumer-2")

	dctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	if err := tiered.Drain(dctx, tiered.NewStreams(rdb, stream, tiered.DefaultGroup)); err != nil {
		t.Fatal(err)
	}
	if res.Failed != 0 || res.Status[http.StatusOK]+res.Status[http.StatusConflict] != requests || res.Acked != stock {
		t.Errorf("want every buy answered 200 or 409 and %d units acknowledged, got %v, %d unanswered, %d acknowledged", stock, res.Status, res.Failed, res.Acked)
	}

	back, err := mysqllock.NewBatched(db, mysqllock.WithTable(table))
	if err != nil {
		t.Fatal(err)
	}
	accepted := map[load.Order]bool{}
	for _, o := range res.Accepted {
		accepted[o] = true
	}
	for i := range requests {
		o := load.Order{Buyer: load.Buyer(i % buyers), ID: fmt.Sprintf("%s%d", orderPrefix, i)}
		id := orderKey(o.Buyer, o.ID)
		info, err := back.Order(ctx, id)
		switch {
		case accepted[o] && err != nil:
			t.Errorf("order %s answered 200, not on the back: %v", id, err)
		case accepted[o] && (info.State != stockguard.OrderTaken || !strategy.SameLines(info.Lines, []stockguard.Line{{SKU: sku, Qty: 1}, {SKU: allowanceSKU(o.Buyer), Qty: 1}})):
			t.Errorf("order %s on the back: %v %v", id, info.State, info.Lines)
		case !accepted[o] && !errors.Is(err, stockguard.ErrUnknownOrder):
			t.Errorf("order %s not answered 200, on the back: %v %v (%v)", id, info.State, info.Lines, err)
		}
	}
	var level int64
	if err := db.Get(&level, "SELECT qty FROM `"+table+"` WHERE sku = ?", sku); err != nil {
		t.Fatal(err)
	}
	front, err := load.Stock(ctx, client, a.url, sku)
	if err != nil {
		t.Fatal(err)
	}
	if level != stock-res.Acked || front != level {
		t.Errorf("back level %d, front %d, want both %d", level, front, stock-res.Acked)
	}
	one := appliedInLog(t, first.log.String())
	two, err := scrape(second, "tiered_consumer_applied_total")
	if err != nil {
		t.Fatal(err)
	}
	inService, err := scrape(b, "tiered_consumer_applied_total")
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("applied: consumer-1 %d entries before its SIGTERM, consumer-2 %v after, the service's consumer %v", one, two, inService)
	if one == 0 || float64(one)+two+inService != float64(res.Acked) {
		t.Errorf("consumer-1 applied %d entries, consumer-2 %v, the service's %v; want %d in all, consumer-1 some", one, two, inService, res.Acked)
	}
	if n, err := scrape(a, "tiered_consumer_applied_total"); n != 0 || err != nil {
		t.Errorf("the service with -consume=false reports %v entries applied (%v)", n, err)
	}
}

// scrape reads the sum of a metric's samples on s's /metrics.
func scrape(s *service, name string) (float64, error) {
	resp, err := http.Get(s.metricsURL + "/metrics")
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 1<<20)
	var sum float64
	for sc.Scan() {
		if _, v, ok := parseSample(sc.Text(), name); ok {
			sum += v
		}
	}
	return sum, sc.Err()
}

// appliedInLog returns the entries a consumer said it applied when it
// stopped.
func appliedInLog(t *testing.T, log string) int64 {
	t.Helper()
	for line := range strings.Lines(log) {
		var rec struct {
			Msg     string `json:"msg"`
			Applied int64  `json:"applied"`
		}
		if json.Unmarshal([]byte(line), &rec) == nil && rec.Msg == "consumer stopped" {
			return rec.Applied
		}
	}
	t.Fatalf("no \"consumer stopped\" in the log:\n%s", log)
	return 0
}

// A tiered front that lost its data (its Redis restarted without
// persistence) stays refused until it is recovered: one more copy started
// with the same flags (-setup-front, as README's deployment lines have it)
// refuses to start rather than arm it again, so alice's acknowledged order
// is never answered 404 and its unit is not sold again.
func TestSeckill_tieredLostFrontIsNotArmedAgain(t *testing.T) {
	r := backendstest.PrivateRedis(t, 1)[0]
	db := backendstest.DB(t)
	table := "seckill_" + randomHex(t)
	t.Cleanup(func() {
		var tables []string
		_ = db.Select(&tables, "SHOW TABLES LIKE ?", table+"%")
		for _, name := range tables {
			_, _ = db.Exec("DROP TABLE `" + name + "`")
		}
	})
	args := append([]string{"-strategy", tieredStrategy, "-setup-front", "-mysql-dsn", backendstest.SharedMySQL(t).DSN, "-mysql-table", table,
		"-redis-addr", r.Addr}, acceptLoss...)
	a := start(t, args...)
	for _, step := range []struct{ path, body string }{{"/skus/flash/stock", `{"qty": 5}`}, {"/buyers/alice", ""}} {
		if r := do(t, "POST", a.adminURL+step.path, step.body, asAdmin); r.status != http.StatusOK {
			t.Fatalf("POST %s = %d %s", step.path, r.status, r.body)
		}
	}
	if r := do(t, "POST", a.url+"/buy", `{"order_id": "o1", "sku": "flash", "qty": 1}`, asBuyer("alice")); r.status != http.StatusOK {
		t.Fatalf("alice's buy = %d %s", r.status, r.body)
	}
	if err := r.Restart(t.Context()); err != nil { // back empty: the front lost its data
		t.Fatal(err)
	}
	if r := do(t, "GET", a.url+"/orders/o1", "", asBuyer("alice")); r.status != http.StatusServiceUnavailable {
		t.Fatalf("alice's order on the lost front = %d %s, want 503", r.status, r.body)
	}
	if r := do(t, "GET", a.url+"/readyz", "", nil); r.status != http.StatusServiceUnavailable || !strings.Contains(r.body, "lost its data") {
		t.Errorf("/readyz on the lost front = %d %s, want 503 saying it lost its data", r.status, r.body)
	}

	b, err := launch(t, args...)
	if err == nil || !strings.Contains(b.log.String(), "Recover") {
		t.Errorf("a copy started on the lost front: exit %v, want a refusal naming Recover\n%s", err, b.log)
	}
	if r := do(t, "GET", a.url+"/orders/o1", "", asBuyer("alice")); r.status != http.StatusServiceUnavailable {
		t.Errorf("alice's order after another copy started = %d %s, want 503", r.status, r.body)
	}
	if r := do(t, "POST", a.adminURL+"/skus/flash/stock", `{"qty": 5}`, asAdmin); r.status != http.StatusServiceUnavailable {
		t.Errorf("stocking the lost front = %d %s, want 503", r.status, r.body)
	}
}
