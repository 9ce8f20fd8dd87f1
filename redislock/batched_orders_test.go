package redislock

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/stockguard/stockguard"
	"github.com/stockguard/stockguard/internal/backends/backendstest"
	"github.com/stockguard/stockguard/internal/combine/combinetest"
	"github.com/stockguard/stockguard/internal/must"
	"github.com/stockguard/stockguard/internal/netgate"
	"github.com/stockguard/stockguard/internal/redistest"
	"github.com/stockguard/stockguard/internal/redisx"
	"github.com/stockguard/stockguard/internal/redisx/cutproxy"
	"github.com/stockguard/stockguard/stocktest"
)

func TestBatched_conformanceOrders(t *testing.T) {
	rdb := backendstest.RedisClient(t)
	prefix := redistest.Prefix(t, rdb)
	suite := stocktest.Suite{Footprint: footprint(t, rdb, prefix)}
	suite.RunOrders(t, func(t *testing.T) stockguard.Orders { return must.New(NewBatched(rdb, WithPrefix(prefix))) })
}

func TestBatched_conformanceOrdersCluster(t *testing.T) {
	rdb := clusterClient(t)
	prefix := redistest.Prefix(t, rdb)
	suite := stocktest.Suite{Footprint: footprint(t, rdb, prefix)}
	suite.RunOrders(t, func(t *testing.T) stockguard.Orders { return must.New(NewBatched(rdb, WithPrefix(prefix))) })
}

// The adversarial checker over Batched's orders, two Batched instances and
// an Atomic sharing the keys, with callers that give up and repeat on
// another instance: on one Redis, then with every connection behind a
// network that delivers a share of the requests after their callers'
// deadlines, on one Redis and on the Cluster.
func TestBatched_adversary(t *testing.T) {
	insts := func(rdb AtomicClient, prefix string) []stockguard.Orders {
		return []stockguard.Orders{must.New(NewBatched(rdb, WithPrefix(prefix))), must.New(NewBatched(rdb, WithPrefix(prefix))), must.New(NewAtomic(rdb, WithPrefix(prefix)))}
	}
	t.Run("single", func(t *testing.T) {
		rdb := backendstest.RedisClient(t)
		stocktest.Adversary{}.RunOrders(t, insts(rdb, redistest.Prefix(t, rdb)))
	})
	t.Run("lateNetwork", func(t *testing.T) {
		l := netgate.Adversarial(t)
		rdb := redistest.LateClient(t, backendstest.SharedRedis(t).Addr, l)
		stocktest.Adversary{Seed: l.Seed(), Late: l.Max()}.RunOrders(t, insts(rdb, redistest.Prefix(t, backendstest.RedisClient(t))))
		l.Check(t)
	})
	t.Run("lateCluster", func(t *testing.T) {
		l := netgate.Adversarial(t)
		cluster := backendstest.SharedCluster(t)
		rdb := redistest.LateCluster(t, cluster.Addrs(), cluster.Dial, l)
		stocktest.Adversary{Seed: l.Seed(), Late: l.Max()}.RunOrders(t, insts(rdb, redistest.Prefix(t, clusterClient(t))))
		l.Check(t)
	})
}

// goTake runs b.Take in a goroutine and hands back its answer.
func goTake(ctx context.Context, b *Batched, id string, lines ...stockguard.Line) <-chan error {
	done := make(chan error, 1)
	go func() { done <- b.Take(ctx, id, lines...) }()
	return done
}

// gatedOrders is gatedBatched with the batch script loaded too, skus
// stocked with stock units each, and the servers' eviction settings asked
// already, so that each order's call is one EVALSHA.
func gatedOrders(t *testing.T, g *gate, proxy *cutproxy.Proxy, stock int64, skus ...string) *Batched {
	t.Helper()
	b := gatedBatched(t, g, proxy, skus[0], stock)
	ctx := t.Context()
	for _, sku := range skus[1:] {
		if err := b.SetStock(ctx, sku, stock); err != nil {
			t.Fatal(err)
		}
	}
	if err := batchPlaceScript.Load(ctx, b.orders.rdb).Err(); err != nil {
		t.Fatal(err)
	}
	if err := b.orders.admitOrder(ctx, nil); err != nil {
		t.Fatal(err)
	}
	return b
}

// stalledOrder starts a Take whose call g holds, so that the orders after
// it queue. The caller releases it.
func stalledOrder(t *testing.T, g *gate, b *Batched, id string, lines ...stockguard.Line) (release func(), first <-chan error) {
	t.Helper()
	release = g.arm()
	t.Cleanup(release)
	first = goTake(t.Context(), b, id, lines...)
	g.wait(t)
	return release, first
}

// queueTakes queues one Take per id, each of lines, behind a held call,
// in order.
func queueTakes(t *testing.T, b *Batched, ids []string, lines ...stockguard.Line) []<-chan error {
	t.Helper()
	var done []<-chan error
	for i, id := range ids {
		done = append(done, goTake(t.Context(), b, id, lines...))
		combinetest.Queued(t, b.placed, "", i+1)
	}
	return done
}

// batchedState checks the state b reports for id (0: ErrUnknownOrder).
func batchedState(t *testing.T, b *Batched, id string, want stockguard.OrderState) {
	t.Helper()
	wantState(t, b.orders, id, want)
}

// A refused order of a batch takes nothing and leaves the tombstone of its
// refusal; the orders before and after it in the batch are applied.
func TestBatched_Orders_refusedInBatch(t *testing.T) {
	g := newGate()
	b := gatedOrders(t, g, nil, 10, "a", "b")
	release, first := stalledOrder(t, g, b, "first", line("a", 1))
	ok1 := goTake(t.Context(), b, "ok1", line("a", 2), line("b", 2))
	combinetest.Queued(t, b.placed, "", 1)
	short := goTake(t.Context(), b, "short", line("a", 3), line("b", 9))
	combinetest.Queued(t, b.placed, "", 2)
	ok2 := goTake(t.Context(), b, "ok2", line("a", 3), line("b", 8))
	combinetest.Queued(t, b.placed, "", 3)
	release()
	for name, d := range map[string]<-chan error{"first": first, "ok1": ok1, "ok2": ok2} {
		if err := <-d; err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
	wantOnly(t, "short", <-short, stockguard.ErrInsufficientStock)
	wantLevels(t, b.orders, map[string]int64{"a": 4, "b": 0})
	batchedState(t, b, "ok1", stockguard.OrderTaken)
	batchedState(t, b, "ok2", stockguard.OrderTaken)
	batchedState(t, b, "short", 0)
	if got, want := b.OrderStats(), (BatchStats{Batches: 2, Requests: 4}); got != want {
		t.Errorf("stats %+v, want %+v", got, want)
	}
	combinetest.Idle(t, b.placed)
}

// An ID twice in one batch is one order: the second finds the first's
// record and takes nothing.
func TestBatched_Orders_repeatInBatchTakesOnce(t *testing.T) {
	g := newGate()
	b := gatedOrders(t, g, nil, 10, "a")
	release, first := stalledOrder(t, g, b, "first", line("a", 1))
	done := queueTakes(t, b, []string{"dup", "dup"}, line("a", 4))
	release()
	for _, d := range append(done, first) {
		if err := <-d; err != nil {
			t.Error(err)
		}
	}
	wantLevels(t, b.orders, map[string]int64{"a": 5})
	batchedState(t, b, "dup", stockguard.OrderTaken)
	if got, want := b.OrderStats(), (BatchStats{Batches: 2, Requests: 3}); got != want {
		t.Errorf("stats %+v, want %+v", got, want)
	}
}

// A caller that leaves while its order waits in the queue gets its
// context's error, and its order is never sent.
func TestBatched_Orders_cancelledWhileQueued(t *testing.T) {
	g := newGate()
	b := gatedOrders(t, g, nil, 10, "a")
	release, first := stalledOrder(t, g, b, "first", line("a", 1))
	ctx, cancel := context.WithCancel(t.Context())
	left := goTake(ctx, b, "left", line("a", 2))
	combinetest.Queued(t, b.placed, "", 1)
	stays := []<-chan error{goTake(t.Context(), b, "stays", line("a", 3))}
	combinetest.Queued(t, b.placed, "", 2) // behind the one that leaves
	cancel()
	if err := <-left; !errors.Is(err, context.Canceled) {
		t.Errorf("the caller that left: %v, want context.Canceled", err)
	}
	release()
	for _, d := range append(stays, first) {
		if err := <-d; err != nil {
			t.Error(err)
		}
	}
	wantLevels(t, b.orders, map[string]int64{"a": 6})
	batchedState(t, b, "left", 0)
	if got, want := b.OrderStats(), (BatchStats{Batches: 2, Requests: 2}); got != want {
		t.Errorf("stats %+v, want %+v", got, want)
	}
}

// When the reply to a call is lost, every order that call carried gets
// ErrOutcomeUnknown — also the one the script refused — and no other order
// does; a repeat of each settles it, applied once.
func TestBatched_Orders_replyLost(t *testing.T) {
	proxy := cutproxy.Start(t, backendstest.SharedRedis(t).Addr)
	g := newGate()
	b := gatedOrders(t, g, proxy, 10, "a")
	release, first := stalledOrder(t, g, b, "first", line("a", 1))
	// The cut call: 9 left; 5 fits (4 left), 6 does not, 3 does (1 left).
	cut := []<-chan error{goTake(t.Context(), b, "c1", line("a", 5))}
	combinetest.Queued(t, b.placed, "", 1)
	cut = append(cut, goTake(t.Context(), b, "c2", line("a", 6)))
	combinetest.Queued(t, b.placed, "", 2)
	cut = append(cut, goTake(t.Context(), b, "c3", line("a", 3)))
	combinetest.Queued(t, b.placed, "", 3)
	releaseCut := g.arm()
	t.Cleanup(releaseCut)
	release()
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	g.wait(t) // the drainer's call, carrying the three
	next := queueTakes(t, b, []string{"n1", "n2"}, line("a", 1))
	proxy.CutNextReply()
	releaseCut()
	for _, d := range cut {
		wantOnly(t, "an order of the cut call", <-d, stockguard.ErrOutcomeUnknown)
	}
	if err := <-next[0]; err != nil {
		t.Errorf("first order after the cut call: %v", err)
	}
	wantOnly(t, "second order after the cut call", <-next[1], stockguard.ErrInsufficientStock)
	ctx := t.Context()
	if err := b.Take(ctx, "c1", line("a", 5)); err != nil {
		t.Errorf("repeat of c1: %v", err)
	}
	if err := b.Take(ctx, "c3", line("a", 3)); err != nil {
		t.Errorf("repeat of c3: %v", err)
	}
	wantLevels(t, b.orders, map[string]int64{"a": 0})
	combinetest.Idle(t, b.placed)
}

// Holds of a batch are held until their deadline, confirmed or returned
// like Atomic's, and a due hold's units go back before a batch refuses an
// order for want of them.
func TestBatched_Orders_holdsInBatch(t *testing.T) {
	rdb := backendstest.RedisClient(t)
	b := must.New(NewBatched(rdb, WithPrefix(redistest.Prefix(t, rdb))))
	ctx := t.Context()
	stockAll(t, b.orders, 5, "a")
	if err := b.Hold(ctx, "h", 50*time.Millisecond, line("a", 5)); err != nil {
		t.Fatal(err)
	}
	wantOnly(t, "take while held", b.Take(ctx, "t0", line("a", 1)), stockguard.ErrInsufficientStock)
	time.Sleep(60 * time.Millisecond)
	if err := b.Take(ctx, "t1", line("a", 5)); err != nil {
		t.Fatalf("take after the hold's deadline: %v", err)
	}
	batchedState(t, b, "h", stockguard.OrderExpired)
	wantOnly(t, "confirm of the expired hold", b.Confirm(ctx, "h"), stockguard.ErrOrderClosed)
	wantLevels(t, b.orders, map[string]int64{"a": 0})
	if err := b.Return(ctx, "t1"); err != nil {
		t.Fatal(err)
	}
	if err := b.Hold(ctx, "h2", time.Minute, line("a", 2)); err != nil {
		t.Fatal(err)
	}
	if err := b.Confirm(ctx, "h2"); err != nil {
		t.Fatal(err)
	}
	batchedState(t, b, "h2", stockguard.OrderTaken)
	wantLevels(t, b.orders, map[string]int64{"a": 3})
}

// Confirms and Returns share a batch with Takes: a Take fits in units a
// Return ahead of it in the batch gave back, and a Return after a Confirm
// of the same hold gives its units back once. The SKU's level and its
// count of units out on open orders end as the calls one after the other
// would leave them.
func TestBatched_Orders_decisionsInBatch(t *testing.T) {
	g := newGate()
	b := gatedOrders(t, g, nil, 10, "a")
	ctx := t.Context()
	if err := b.Take(ctx, "t1", line("a", 3)); err != nil {
		t.Fatal(err)
	}
	if err := b.Hold(ctx, "h1", time.Minute, line("a", 2)); err != nil {
		t.Fatal(err)
	}
	release, first := stalledOrder(t, g, b, "first", line("a", 1)) // 4 left
	var done []<-chan error
	call := func(f func() error) {
		d := make(chan error, 1)
		go func() { d <- f() }()
		done = append(done, d)
		combinetest.Queued(t, b.placed, "", len(done))
	}
	call(func() error { return b.Return(ctx, "t1") })             // 7
	call(func() error { return b.Take(ctx, "t2", line("a", 6)) }) // 1
	call(func() error { return b.Confirm(ctx, "h1") })            // 1
	call(func() error { return b.Return(ctx, "h1") })             // 3
	call(func() error { return b.Take(ctx, "t3", line("a", 4)) }) // refused
	release()
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	for i, d := range done[:4] {
		if err := <-d; err != nil {
			t.Errorf("call %d: %v", i, err)
		}
	}
	wantOnly(t, "t3", <-done[4], stockguard.ErrInsufficientStock)
	wantLevels(t, b.orders, map[string]int64{"a": 3})
	batchedState(t, b, "t1", stockguard.OrderReturned)
	batchedState(t, b, "h1", stockguard.OrderReturned)
	batchedState(t, b, "t2", stockguard.OrderTaken)
	rdb := backendstest.RedisClient(t)
	if out, err := rdb.ZScore(ctx, b.orders.holdsKey("a"), "#out").Result(); err != nil || out != -7 {
		t.Errorf("units out on open orders: %v, %v; want 7 (t2 and first)", -out, err)
	}
	if got, want := b.OrderStats(), (BatchStats{Batches: 4, Requests: 8}); got != want {
		t.Errorf("stats %+v, want %+v", got, want)
	}
}

// idInSlotOf returns an order ID, none of skip, whose record shares the
// cluster slot of sku's keys.
func idInSlotOf(t *testing.T, a *Atomic, sku string, skip ...string) string {
	t.Helper()
	for i := range 1 << 22 {
		id := fmt.Sprintf("o%d", i)
		if slot(a.orderKey(id)) == slot(a.keys.Stock(sku)) && !slices.Contains(skip, id) {
			return id
		}
	}
	t.Fatalf("no ID in the slot of %q", sku)
	return ""
}

// On a Cluster, the orders whose keys share a slot queue behind that
// slot's call and go out together; an order of another slot does not wait
// for it.
func TestBatched_Orders_clusterBatchPerSlot(t *testing.T) {
	g := newGate()
	rdb := redis.NewClusterClient(&redis.ClusterOptions{Addrs: backendstest.SharedCluster(t).Addrs(), Dialer: g.dial})
	t.Cleanup(func() { rdb.Close() })
	b := must.New(NewBatched(rdb, WithPrefix(redistest.Prefix(t, clusterClient(t)))))
	ctx := t.Context()
	if slot(b.orders.keys.Stock("s")) == slot(b.orders.keys.Stock("u")) {
		t.Fatal("SKUs s and u share a slot")
	}
	stockAll(t, b.orders, 10, "s", "u")
	if err := batchPlaceScript.Load(ctx, rdb).Err(); err != nil {
		t.Fatal(err)
	}
	if err := b.orders.admitOrder(ctx, nil); err != nil {
		t.Fatal(err)
	}
	o1 := idInSlotOf(t, b.orders, "s")
	o2 := idInSlotOf(t, b.orders, "s", o1)
	o3 := idInSlotOf(t, b.orders, "s", o1, o2)
	release, first := stalledOrder(t, g, b, o1, line("s", 1))
	queue := b.queueOf(o1, "")
	second := goTake(ctx, b, o2, line("s", 2))
	combinetest.Queued(t, b.placed, queue, 1)
	third := goTake(ctx, b, o3, line("s", 3))
	combinetest.Queued(t, b.placed, queue, 2)
	if err := b.Take(ctx, idInSlotOf(t, b.orders, "u"), line("u", 4)); err != nil {
		t.Fatalf("an order of another slot while the first slot's call is held: %v", err)
	}
	release()
	for _, d := range []<-chan error{first, second, third} {
		if err := <-d; err != nil {
			t.Error(err)
		}
	}
	wantLevels(t, b.orders, map[string]int64{"s": 4, "u": 6})
	if got, want := b.OrderStats(), (BatchStats{Batches: 3, Requests: 4}); got != want {
		t.Errorf("stats %+v, want %+v", got, want)
	}
}

// An order that fails in its batch's script with an error of its own (its
// SKU's holds key holds a string) is ErrUnavailable, nothing of it
// applied, and the orders before and after it in the batch stand.
func TestBatched_Orders_failedInBatch(t *testing.T) {
	g := newGate()
	b := gatedOrders(t, g, nil, 10, "a", "b")
	ctx := t.Context()
	if err := backendstest.RedisClient(t).Set(ctx, b.orders.holdsKey("b"), "not a sorted set", 0).Err(); err != nil {
		t.Fatal(err)
	}
	release, first := stalledOrder(t, g, b, "first", line("a", 1))
	done := []<-chan error{goTake(ctx, b, "ok1", line("a", 2))}
	combinetest.Queued(t, b.placed, "", 1)
	failed := goTake(ctx, b, "failed", line("a", 3), line("b", 3))
	combinetest.Queued(t, b.placed, "", 2)
	done = append(done, goTake(ctx, b, "ok2", line("a", 4)))
	combinetest.Queued(t, b.placed, "", 3)
	release()
	for _, d := range append(done, first) {
		if err := <-d; err != nil {
			t.Error(err)
		}
	}
	wantOnly(t, "the failed order", <-failed, stockguard.ErrUnavailable)
	batchedState(t, b, "failed", 0)
	if n, err := backendstest.RedisClient(t).Get(ctx, b.orders.keys.Stock("a")).Int64(); err != nil || n != 3 {
		t.Errorf("level of a: %d, %v; want 3", n, err)
	}
}

// partitions records the partition (redisx.Partition) each script call
// carries.
type partitions struct {
	mu  sync.Mutex
	got []string
}

func (p *partitions) DialHook(next redis.DialHook) redis.DialHook { return next }

func (p *partitions) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

func (p *partitions) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if name := cmd.Name(); name == "evalsha" || name == "eval" {
			p.mu.Lock()
			p.got = append(p.got, redisx.Partition(ctx))
			p.mu.Unlock()
		}
		return next(ctx, cmd)
	}
}

// Orders of different partitions never share a script call: one of a
// partition whose call is held goes out at once, and the batch of the
// orders queued behind the held call carries their partition.
func TestBatched_Orders_batchPerPartition(t *testing.T) {
	g := newGate()
	b := gatedOrders(t, g, nil, 10, "a")
	rec := &partitions{}
	b.orders.rdb.(*redis.Client).AddHook(rec)
	ctx := t.Context()
	p1 := redisx.WithPartition(ctx, "p1")
	release := g.arm()
	t.Cleanup(release)
	first := goTake(p1, b, "first", line("a", 1))
	g.wait(t)
	if err := b.Take(ctx, "other", line("a", 1)); err != nil {
		t.Fatalf("an order of another partition while p1's call is held: %v", err)
	}
	second := goTake(p1, b, "second", line("a", 1))
	combinetest.Queued(t, b.placed, "p1", 1)
	third := goTake(p1, b, "third", line("a", 1))
	combinetest.Queued(t, b.placed, "p1", 2)
	release()
	for _, d := range []<-chan error{first, second, third} {
		if err := <-d; err != nil {
			t.Error(err)
		}
	}
	if got, want := b.OrderStats(), (BatchStats{Batches: 3, Requests: 4}); got != want {
		t.Errorf("stats %+v, want %+v", got, want)
	}
	rec.mu.Lock()
	got := slices.Clone(rec.got)
	rec.mu.Unlock()
	if want := []string{"p1", "", "p1"}; !slices.Equal(got, want) {
		t.Errorf("the script calls carried partitions %q, want %q", got, want)
	}
	wantLevels(t, b, map[string]int64{"a": 6})
}
