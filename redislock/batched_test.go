package redislock

import (
	"bytes"
	"context"
	"errors"
	"net"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stockguard/stockguard"
	"github.com/stockguard/stockguard/internal/backends/backendstest"
	"github.com/stockguard/stockguard/internal/combine/combinetest"
	"github.com/stockguard/stockguard/internal/must"
	"github.com/stockguard/stockguard/internal/rediskeys"
	"github.com/stockguard/stockguard/internal/redistest"
	"github.com/stockguard/stockguard/internal/redisx"
	"github.com/stockguard/stockguard/internal/redisx/cutproxy"
	"github.com/stockguard/stockguard/stocktest"
	"github.com/stockguard/stockguard/strategy"
)

func TestBatched_conformance(t *testing.T) {
	rdb := backendstest.RedisClient(t)
	prefix := redistest.Prefix(t, rdb)
	stocktest.Run(t, func(t *testing.T) stockguard.Inventory { return must.New(NewBatched(rdb, WithPrefix(prefix))) })
}

// TestBatched_conformanceCluster runs the suite on a 3-master Redis
// Cluster: one SKU is one key, so a batch's script routes by its slot.
func TestBatched_conformanceCluster(t *testing.T) {
	rdb := clusterClient(t)
	prefix := redistest.Prefix(t, rdb)
	stocktest.Run(t, func(t *testing.T) stockguard.Inventory { return must.New(NewBatched(rdb, WithPrefix(prefix))) })
}

// wantOnly fails t unless err matches exactly one contract error, want.
func wantOnly(t testing.TB, what string, err, want error) {
	t.Helper()
	var hits []error
	for _, e := range strategy.ContractErrors() {
		if errors.Is(err, e) {
			hits = append(hits, e)
		}
	}
	if len(hits) != 1 || hits[0] != want {
		t.Errorf("%s: %v (matches %v), want exactly %v", what, err, hits, want)
	}
}

func TestBatched_validatesBeforeIO(t *testing.T) {
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"})
	rdb.Close()
	ctx := t.Context()
	b, err := NewBatched(rdb)
	if err != nil {
		t.Fatal(err)
	}
	var nilCtx context.Context
	for name, err := range map[string]error{
		"Decrement empty sku":   b.Decrement(ctx, "", 1),
		"Decrement qty 0":       b.Decrement(ctx, "x", 0),
		"Decrement qty big":     b.Decrement(ctx, "x", stockguard.MaxQty+1),
		"Decrement nil context": b.Decrement(nilCtx, "x", 1),
		"SetStock negative":     b.SetStock(ctx, "x", -1),
		"SetStock nil context":  b.SetStock(nilCtx, "x", 1),
	} {
		wantOnly(t, name, err, stockguard.ErrInvalidRequest)
	}
	if _, err := b.Stock(nilCtx, "x"); !errors.Is(err, stockguard.ErrInvalidRequest) {
		t.Errorf("Stock with a nil context: %v, want ErrInvalidRequest", err)
	}
	// A valid request reaches the closed client: nothing sent, classified
	// as redisx says.
	notSent := strategy.Contract(redisx.Classify(ctx, redis.ErrClosed, redisx.Write))
	wantOnly(t, "Decrement on a closed client", b.Decrement(ctx, "x", 1), notSent)
	if got := b.Stats(); got != (BatchStats{Batches: 1, Requests: 1}) {
		t.Errorf("stats %+v after one request refused by the client", got)
	}
}

func TestWithBatchSize(t *testing.T) {
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"})
	rdb.Close()
	for _, c := range []struct {
		n    int
		ok   bool
		size int
	}{
		{1, true, 1},
		{10_000, true, 10_000},
		{0, false, 0},
		{-1, false, 0},
		{10_001, false, 0},
	} {
		if c.ok {
			if o := newOptions([]Option{WithBatchSize(c.n)}); o.err != nil || o.batchSize != c.size {
				t.Errorf("WithBatchSize(%d): size %d, %v", c.n, o.batchSize, o.err)
			}
			continue
		}
		// Refused by the constructor, before any I/O.
		if b, err := NewBatched(rdb, WithBatchSize(c.n)); b != nil || !errors.Is(err, stockguard.ErrInvalidRequest) {
			t.Errorf("WithBatchSize(%d): %v, %v; want nil and ErrInvalidRequest", c.n, b, err)
		}
	}
	if o := newOptions(nil); o.batchSize != DefaultBatchSize || o.err != nil {
		t.Errorf("default size %d, %v", o.batchSize, o.err)
	}
}

func TestParseBatchReply(t *testing.T) {
	for _, c := range []struct {
		name  string
		reply any
		n     int
		want  batchReply
		ok    bool
	}{
		{"granted and refused", []any{int64(7), "101"}, 3, batchReply{level: 7, granted: "101"}, true},
		{"missing", int64(-1), 2, batchReply{missing: true}, true},
		{"corrupt", int64(-3), 2, batchReply{corrupt: true}, true},
		{"other code", int64(-2), 2, batchReply{}, false},
		{"too few flags", []any{int64(7), "10"}, 3, batchReply{}, false},
		{"bad flag", []any{int64(7), "1x1"}, 3, batchReply{}, false},
		{"negative level", []any{int64(-7), "1"}, 1, batchReply{}, false},
		{"level not a number", []any{"7", "1"}, 1, batchReply{}, false},
		{"short array", []any{int64(7)}, 1, batchReply{}, false},
		{"string", "OK", 1, batchReply{}, false},
		{"resolve", []any{int64(codeResolve), "o1", "o2"}, 1, batchReply{remote: []string{"o1", "o2"}}, true},
		{"resolve nothing", []any{int64(codeResolve)}, 1, batchReply{}, false},
		{"more", []any{int64(codeMore), "1:1:5:0"}, 1, batchReply{next: "1:1:5:0"}, true},
	} {
		got, err := parseBatchReply(c.reply, c.n)
		switch {
		case c.ok && (err != nil || !reflect.DeepEqual(got, c.want)):
			t.Errorf("%s: %+v, %v; want %+v", c.name, got, err, c.want)
		case !c.ok:
			wantOnly(t, c.name, err, stockguard.ErrOutcomeUnknown)
		}
	}
}

// gate dials connections whose script calls (EVALSHA, EVAL) it can hold
// back before they reach Redis, so that requests queue behind a call in
// flight.
type gate struct {
	mu    sync.Mutex
	armed chan struct{} // the next script call waits for it to close
	held  chan struct{} // a script call is being held
}

func newGate() *gate { return &gate{held: make(chan struct{}, 8)} }

// arm makes the next script call wait until release is called.
func (g *gate) arm() (release func()) {
	ch := make(chan struct{})
	g.mu.Lock()
	g.armed = ch
	g.mu.Unlock()
	return sync.OnceFunc(func() { close(ch) })
}

// wait returns once a script call is held.
func (g *gate) wait(t *testing.T) {
	t.Helper()
	select {
	case <-g.held:
	case <-time.After(10 * time.Second):
		t.Fatal("no script call was held")
	}
}

func (g *gate) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	c, err := (&net.Dialer{}).DialContext(ctx, network, addr)
	if err != nil {
		return nil, err
	}
	return &gatedConn{Conn: c, g: g}, nil
}

type gatedConn struct {
	net.Conn
	g *gate
}

func (c *gatedConn) Write(p []byte) (int, error) {
	if bytes.Contains(p, []byte("\r\nevalsha\r\n")) || bytes.Contains(p, []byte("\r\neval\r\n")) {
		c.g.mu.Lock()
		ch := c.g.armed
		c.g.armed = nil
		c.g.mu.Unlock()
		if ch != nil {
			c.g.held <- struct{}{}
			<-ch
		}
	}
	return c.Conn.Write(p)
}

// gatedBatched returns a Batched on the shared server, through g (and
// through proxy, when given), with its script loaded, so that its first
// call is one EVALSHA, and sku stocked.
func gatedBatched(t *testing.T, g *gate, proxy *cutproxy.Proxy, sku string, stock int64, opts ...Option) *Batched {
	t.Helper()
	addr := backendstest.SharedRedis(t).Addr
	if proxy != nil {
		addr = proxy.Addr
	}
	rdb := redis.NewClient(&redis.Options{Addr: addr, Dialer: g.dial})
	t.Cleanup(func() { rdb.Close() })
	b, err := NewBatched(rdb, append([]Option{WithPrefix(redistest.Prefix(t, backendstest.RedisClient(t)))}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	if err := batchedScript.Load(t.Context(), rdb).Err(); err != nil {
		t.Fatal(err)
	}
	if err := b.SetStock(t.Context(), sku, stock); err != nil {
		t.Fatal(err)
	}
	return b
}

// stalledCall starts a request for sku whose call g holds, so that the
// requests after it queue. The caller releases it.
func stalledCall(t *testing.T, g *gate, b *Batched, sku string, qty int64) (release func(), first <-chan error) {
	t.Helper()
	release = g.arm()
	t.Cleanup(release)
	first = combinetest.Go(t.Context(), b, sku, qty)
	g.wait(t)
	return release, first
}

func mustStock(t *testing.T, b *Batched, sku string, want int64) {
	t.Helper()
	if n, err := b.Stock(t.Context(), sku); n != want || err != nil {
		t.Fatalf("Stock(%q) = %d, %v; want %d", sku, n, err, want)
	}
}

// The requests queued behind a call go out together, in arrival order:
// their total does not fit, so each is granted while it fits — the later,
// smaller ones too.
func TestBatched_Decrement_grantsInArrivalOrder(t *testing.T) {
	g := newGate()
	b := gatedBatched(t, g, nil, "hot", 10)
	release, first := stalledCall(t, g, b, "hot", 3)
	qtys := []int64{5, 4, 1, 1, 2}
	var done []<-chan error
	for i, qty := range qtys {
		done = append(done, combinetest.Go(t.Context(), b, "hot", qty))
		combinetest.Queued(t, b.calls, "hot", i+1)
	}
	release()
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	// 7 left: 5 fits (2 left), 4 does not, 1 and 1 do (0 left), 2 does not.
	for i, want := range []error{nil, stockguard.ErrInsufficientStock, nil, nil, stockguard.ErrInsufficientStock} {
		err := <-done[i]
		if want == nil && err != nil {
			t.Errorf("request %d for %d: %v", i, qtys[i], err)
		} else if want != nil {
			wantOnly(t, "refused request", err, want)
		}
	}
	mustStock(t, b, "hot", 0)
	if got, want := b.Stats(), (BatchStats{Batches: 2, Requests: 6}); got != want {
		t.Errorf("stats %+v, want %+v", got, want)
	}
	combinetest.Idle(t, b.calls)
}

// The batch size bounds what one call carries.
func TestBatched_Decrement_batchSizeBound(t *testing.T) {
	g := newGate()
	b := gatedBatched(t, g, nil, "hot", 100, WithBatchSize(2))
	release, first := stalledCall(t, g, b, "hot", 1)
	var done []<-chan error
	for i := range 5 {
		done = append(done, combinetest.Go(t.Context(), b, "hot", 1))
		combinetest.Queued(t, b.calls, "hot", i+1)
	}
	release()
	for _, d := range append(done, first) {
		if err := <-d; err != nil {
			t.Fatal(err)
		}
	}
	if got, want := b.Stats(), (BatchStats{Batches: 4, Requests: 6}); got != want {
		t.Errorf("stats %+v, want %+v", got, want)
	}
	mustStock(t, b, "hot", 94)
}

// Every request of a batch for an unknown SKU learns so, and no key
// appears.
func TestBatched_Decrement_unknownSKUCreatesNothing(t *testing.T) {
	g := newGate()
	b := gatedBatched(t, g, nil, "hot", 10)
	release, first := stalledCall(t, g, b, "ghost", 1)
	var done []<-chan error
	for i := range 3 {
		done = append(done, combinetest.Go(t.Context(), b, "ghost", int64(i+2)))
		combinetest.Queued(t, b.calls, "ghost", i+1)
	}
	release()
	for _, d := range append(done, first) {
		wantOnly(t, "Decrement of an unknown sku", <-d, stockguard.ErrUnknownSKU)
	}
	if got, want := b.Stats(), (BatchStats{Batches: 2, Requests: 4}); got != want {
		t.Errorf("stats %+v, want %+v", got, want)
	}
	rdb := backendstest.RedisClient(t)
	if n := rdb.Exists(t.Context(), b.orders.keys.Stock("ghost")).Val(); n != 0 {
		t.Fatalf("EXISTS after Decrement of an unknown sku = %d, want 0", n)
	}
	combinetest.Idle(t, b.calls)
}

func TestBatched_Decrement_corruptValue(t *testing.T) {
	rdb := backendstest.RedisClient(t)
	prefix := redistest.Prefix(t, rdb)
	b, err := NewBatched(rdb, WithPrefix(prefix))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range redistest.CorruptValues {
		t.Run(c.Name, func(t *testing.T) {
			key := rediskeys.Keys{Prefix: prefix}.Stock(c.Name)
			if err := c.Set(t.Context(), rdb, key); err != nil {
				t.Fatal(err)
			}
			checkCorrupt(t, b, rdb, key, c.Name)
		})
	}
}

// cancelable stocks "hot" with 10 units and queues, behind a held call for
// 1, a request for 2 that cancel abandons, then one for 3.
func cancelable(t *testing.T) (g *gate, b *Batched, release func(), first, gone, last <-chan error, cancel context.CancelFunc) {
	t.Helper()
	g = newGate()
	b = gatedBatched(t, g, nil, "hot", 10)
	release, first = stalledCall(t, g, b, "hot", 1)
	ctx, cancel := context.WithCancel(t.Context())
	t.Cleanup(cancel)
	gone = combinetest.Go(ctx, b, "hot", 2)
	combinetest.Queued(t, b.calls, "hot", 1)
	last = combinetest.Go(t.Context(), b, "hot", 3)
	combinetest.Queued(t, b.calls, "hot", 2)
	return g, b, release, first, gone, last, cancel
}

// A request whose context ends while it waits in the queue is dropped
// without effect; one whose call is in flight gets ErrOutcomeUnknown.
func TestBatched_Decrement_canceled(t *testing.T) {
	t.Run("queued", func(t *testing.T) {
		_, b, release, first, gone, last, cancel := cancelable(t)
		cancel()
		wantOnly(t, "canceled while queued", <-gone, context.Canceled)
		release()
		for _, done := range []<-chan error{first, last} {
			if err := <-done; err != nil {
				t.Fatal(err)
			}
		}
		mustStock(t, b, "hot", 6)
		if got := b.Stats().Requests; got != 2 {
			t.Errorf("%d requests sent, want 2", got)
		}
		combinetest.Idle(t, b.calls)
	})
	t.Run("in flight", func(t *testing.T) {
		g, b, release, first, gone, last, cancel := cancelable(t)
		releaseDrainer := g.arm() // holds the drainer's call too
		t.Cleanup(releaseDrainer)
		release()
		if err := <-first; err != nil {
			t.Fatal(err)
		}
		g.wait(t)
		cancel()
		wantOnly(t, "canceled in flight", <-gone, stockguard.ErrOutcomeUnknown)
		releaseDrainer()
		if err := <-last; err != nil {
			t.Fatal(err)
		}
		// The call was sent all the same: the canceled request's units are
		// gone, as ErrOutcomeUnknown allows.
		mustStock(t, b, "hot", 4)
		combinetest.Idle(t, b.calls)
	})
}

// When the reply to a call is lost, every request that call carried gets
// ErrOutcomeUnknown — also the one the script refused, whose refusal was in
// the lost reply — and no other request does. The call was applied once.
func TestBatched_Decrement_replyLost(t *testing.T) {
	srv := backendstest.SharedRedis(t)
	proxy := cutproxy.Start(t, srv.Addr)
	g := newGate()
	b := gatedBatched(t, g, proxy, "hot", 10)
	release, first := stalledCall(t, g, b, "hot", 1)
	// The cut call: 9 left; 5 fits (4 left), 6 does not, 3 does (1 left).
	var cut []<-chan error
	for i, qty := range []int64{5, 6, 3} {
		cut = append(cut, combinetest.Go(t.Context(), b, "hot", qty))
		combinetest.Queued(t, b.calls, "hot", i+1)
	}
	releaseCut := g.arm()
	t.Cleanup(releaseCut)
	release()
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	g.wait(t) // the drainer's call, carrying the three
	// The next call: 1 fits (0 left), 1 does not.
	var next []<-chan error
	for i := range 2 {
		next = append(next, combinetest.Go(t.Context(), b, "hot", 1))
		combinetest.Queued(t, b.calls, "hot", i+1)
	}
	proxy.CutNextReply()
	releaseCut()
	for _, d := range cut {
		wantOnly(t, "member of the cut call", <-d, stockguard.ErrOutcomeUnknown)
	}
	if err := <-next[0]; err != nil {
		t.Errorf("first request after the cut call: %v", err)
	}
	wantOnly(t, "second request after the cut call", <-next[1], stockguard.ErrInsufficientStock)
	mustStock(t, b, "hot", 0)
	if got, want := b.Stats(), (BatchStats{Batches: 3, Requests: 6}); got != want {
		t.Errorf("stats %+v, want %+v", got, want)
	}
	combinetest.Idle(t, b.calls)
}

// drainMixed runs combinetest.DrainMixed over insts and checks that
// their calls carried two requests each on average.
func drainMixed(t *testing.T, insts []*Batched, sku string, stock int64) {
	t.Helper()
	var invs []stockguard.Inventory
	for _, b := range insts {
		invs = append(invs, b)
	}
	combinetest.DrainMixed(t, invs, sku, stock)
	var s BatchStats
	for _, b := range insts {
		combinetest.Idle(t, b.calls)
		s.Batches += b.Stats().Batches
		s.Requests += b.Stats().Requests
	}
	combinetest.Combined(t, s.Batches, s.Requests)
}

// Two instances, as two processes, combine their own buyers' requests;
// Redis keeps the total exact, and batches of more than one form.
func TestBatched_Decrement_combinesAcrossInstances(t *testing.T) {
	rdb := backendstest.RedisClient(t)
	prefix := redistest.Prefix(t, rdb)
	drainMixed(t, []*Batched{must.New(NewBatched(rdb, WithPrefix(prefix))), must.New(NewBatched(rdb, WithPrefix(prefix)))}, "hot", 5000)
}

func TestBatched_cluster_combinesAcrossInstances(t *testing.T) {
	rdb := clusterClient(t)
	prefix := redistest.Prefix(t, rdb)
	for _, sku := range []string{"hot", "{x}", "a}b{c"} {
		drainMixed(t, []*Batched{must.New(NewBatched(rdb, WithPrefix(prefix))), must.New(NewBatched(rdb, WithPrefix(prefix)))}, sku, 2000)
	}
}

// Batched and Atomic share the stock key: both take from one level.
func TestBatched_sharesStockWithAtomic(t *testing.T) {
	rdb := backendstest.RedisClient(t)
	prefix := redistest.Prefix(t, rdb)
	a, b := must.New(NewAtomic(rdb, WithPrefix(prefix))), must.New(NewBatched(rdb, WithPrefix(prefix)))
	ctx := t.Context()
	if err := a.SetStock(ctx, "hot", 10); err != nil {
		t.Fatal(err)
	}
	if err := b.Decrement(ctx, "hot", 4); err != nil {
		t.Fatal(err)
	}
	if err := a.Decrement(ctx, "hot", 5); err != nil {
		t.Fatal(err)
	}
	wantOnly(t, "Batched after Atomic", b.Decrement(ctx, "hot", 2), stockguard.ErrInsufficientStock)
	mustStock(t, b, "hot", 1)
}
