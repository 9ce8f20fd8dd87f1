package redislock

import (
	"bytes"
	"context"
	"errors"
	"math/rand/v2"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stockguard/stockguard"
	"github.com/stockguard/stockguard/internal/backends/backendstest"
	"github.com/stockguard/stockguard/internal/rediskeys"
	"github.com/stockguard/stockguard/internal/redistest"
	"github.com/stockguard/stockguard/internal/redisx"
	"github.com/stockguard/stockguard/internal/redisx/cutproxy"
	"github.com/stockguard/stockguard/stocktest"
)

func TestBatched_conformance(t *testing.T) {
	rdb := backendstest.RedisClient(t)
	prefix := redistest.Prefix(t, rdb)
	stocktest.Run(t, func(t *testing.T) stockguard.Inventory { return NewBatched(rdb, WithPrefix(prefix)) })
}

// TestBatched_conformanceCluster runs the suite on a 3-master Redis
// Cluster: one SKU is one key, so a batch's script routes by its slot.
func TestBatched_conformanceCluster(t *testing.T) {
	rdb := clusterClient(t)
	prefix := redistest.Prefix(t, rdb)
	stocktest.Run(t, func(t *testing.T) stockguard.Inventory { return NewBatched(rdb, WithPrefix(prefix)) })
}

// wantOnly fails t unless err matches exactly one contract error, want.
func wantOnly(t testing.TB, what string, err, want error) {
	t.Helper()
	var hits []error
	for _, e := range stockguard.ContractErrors() {
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
	b := NewBatched(rdb)
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
	notSent := stockguard.Contract(redisx.Classify(ctx, redis.ErrClosed, redisx.Write))
	wantOnly(t, "Decrement on a closed client", b.Decrement(ctx, "x", 1), notSent)
	if got := b.Stats(); got != (BatchStats{Batches: 1, Requests: 1}) {
		t.Errorf("stats %+v after one request refused by the client", got)
	}
}

func TestWithBatchSize(t *testing.T) {
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"})
	rdb.Close()
	ctx := t.Context()
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
		b := NewBatched(rdb, WithBatchSize(c.n))
		if c.ok {
			if b.err != nil || b.size != c.size {
				t.Errorf("WithBatchSize(%d): size %d, %v", c.n, b.size, b.err)
			}
			continue
		}
		// The deferred error comes from every method, before any I/O and
		// before the request's own checks.
		wantOnly(t, "Decrement", b.Decrement(ctx, "x", 1), stockguard.ErrInvalidRequest)
		wantOnly(t, "Decrement of a bad request", b.Decrement(ctx, "", 0), stockguard.ErrInvalidRequest)
		wantOnly(t, "SetStock", b.SetStock(ctx, "x", 1), stockguard.ErrInvalidRequest)
		if _, err := b.Stock(ctx, "x"); !errors.Is(err, stockguard.ErrInvalidRequest) {
			t.Errorf("WithBatchSize(%d): Stock: %v", c.n, err)
		}
		if b.Stats() != (BatchStats{}) {
			t.Errorf("WithBatchSize(%d): stats %+v, want nothing sent", c.n, b.Stats())
		}
	}
	if b := NewBatched(rdb); b.size != DefaultBatchSize || b.err != nil {
		t.Errorf("default size %d, %v", b.size, b.err)
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
	} {
		got, err := parseBatchReply(c.reply, c.n)
		switch {
		case c.ok && (err != nil || got != c.want):
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
// through proxy, when given), with its script loaded and sku stocked.
func gatedBatched(t *testing.T, g *gate, proxy *cutproxy.Proxy, sku string, stock int64, opts ...Option) *Batched {
	t.Helper()
	addr := backendstest.SharedRedis(t).Addr
	if proxy != nil {
		addr = proxy.Addr
	}
	rdb := redis.NewClient(&redis.Options{Addr: addr, Dialer: g.dial})
	t.Cleanup(func() { rdb.Close() })
	b := NewBatched(rdb, append([]Option{WithPrefix(redistest.Prefix(t, backendstest.RedisClient(t)))}, opts...)...)
	if err := b.SetStock(t.Context(), sku, stock+1); err != nil {
		t.Fatal(err)
	}
	if err := b.Decrement(t.Context(), sku, 1); err != nil { // loads the script
		t.Fatal(err)
	}
	b.batches.Store(0)
	b.requests.Store(0)
	return b
}

// goDecrement starts b.Decrement and returns where its error will be.
func goDecrement(ctx context.Context, b *Batched, sku string, qty int64) <-chan error {
	done := make(chan error, 1)
	go func() { done <- b.Decrement(ctx, sku, qty) }()
	return done
}

// stalledCall starts a request for sku whose call g holds, so that the
// requests after it queue. The caller releases it.
func stalledCall(t *testing.T, g *gate, b *Batched, sku string, qty int64) (release func(), first <-chan error) {
	t.Helper()
	release = g.arm()
	t.Cleanup(release)
	first = goDecrement(t.Context(), b, sku, qty)
	g.wait(t)
	return release, first
}

// queued waits until sku's queue in b holds n requests: 0 means a
// drainer has taken them all.
func queued(t *testing.T, b *Batched, sku string, n int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		b.mu.Lock()
		got := -1
		if q := b.queues[sku]; q != nil {
			got = len(q.pending)
		}
		b.mu.Unlock()
		if got == n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d requests queued for %q, want %d", got, sku, n)
		}
		time.Sleep(time.Millisecond)
	}
}

// idle waits until b has no queue left: drainers remove them when done.
func idle(t *testing.T, b *Batched) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		b.mu.Lock()
		n := len(b.queues)
		b.mu.Unlock()
		if n == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d queues left after every request returned", n)
		}
		time.Sleep(time.Millisecond)
	}
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
		done = append(done, goDecrement(t.Context(), b, "hot", qty))
		queued(t, b, "hot", i+1)
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
	idle(t, b)
}

// The batch size bounds what one call carries.
func TestBatched_Decrement_batchSizeBound(t *testing.T) {
	g := newGate()
	b := gatedBatched(t, g, nil, "hot", 100, WithBatchSize(2))
	release, first := stalledCall(t, g, b, "hot", 1)
	var done []<-chan error
	for i := range 5 {
		done = append(done, goDecrement(t.Context(), b, "hot", 1))
		queued(t, b, "hot", i+1)
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
		done = append(done, goDecrement(t.Context(), b, "ghost", int64(i+2)))
		queued(t, b, "ghost", i+1)
	}
	release()
	for _, d := range append(done, first) {
		wantOnly(t, "Decrement of an unknown sku", <-d, stockguard.ErrUnknownSKU)
	}
	if got, want := b.Stats(), (BatchStats{Batches: 2, Requests: 4}); got != want {
		t.Errorf("stats %+v, want %+v", got, want)
	}
	rdb := backendstest.RedisClient(t)
	if n := rdb.Exists(t.Context(), b.levels.Keys.Stock("ghost")).Val(); n != 0 {
		t.Fatalf("EXISTS after Decrement of an unknown sku = %d, want 0", n)
	}
	idle(t, b)
}

func TestBatched_Decrement_corruptValue(t *testing.T) {
	rdb := backendstest.RedisClient(t)
	prefix := redistest.Prefix(t, rdb)
	b := NewBatched(rdb, WithPrefix(prefix))
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

// A request whose context ends while it waits in the queue is dropped
// without effect; one whose call is in flight gets ErrOutcomeUnknown.
func TestBatched_Decrement_canceled(t *testing.T) {
	t.Run("queued", func(t *testing.T) {
		g := newGate()
		b := gatedBatched(t, g, nil, "hot", 10)
		release, first := stalledCall(t, g, b, "hot", 1)
		ctx, cancel := context.WithCancel(t.Context())
		gone := goDecrement(ctx, b, "hot", 2)
		queued(t, b, "hot", 1)
		last := goDecrement(t.Context(), b, "hot", 3)
		queued(t, b, "hot", 2)
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
		idle(t, b)
	})
	t.Run("in flight", func(t *testing.T) {
		g := newGate()
		b := gatedBatched(t, g, nil, "hot", 10)
		release, first := stalledCall(t, g, b, "hot", 1)
		ctx, cancel := context.WithCancel(t.Context())
		gone := goDecrement(ctx, b, "hot", 2)
		queued(t, b, "hot", 1)
		last := goDecrement(t.Context(), b, "hot", 3)
		queued(t, b, "hot", 2)
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
		idle(t, b)
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
		cut = append(cut, goDecrement(t.Context(), b, "hot", qty))
		queued(t, b, "hot", i+1)
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
		next = append(next, goDecrement(t.Context(), b, "hot", 1))
		queued(t, b, "hot", i+1)
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
	idle(t, b)
}

// drainMixed lets 64 goroutines, spread over insts, take 1–5 units of sku
// (stocked with stock) until each is refused a single unit. It checks that
// the units acknowledged are exactly the units gone and that no refusal was
// false: stock only goes down, so every refused request must want more
// than what is left at the end.
func drainMixed(t *testing.T, insts []*Batched, sku string, stock int64) {
	t.Helper()
	if err := insts[0].SetStock(t.Context(), sku, stock); err != nil {
		t.Fatal(err)
	}
	var acked, minRefused atomic.Int64
	minRefused.Store(stockguard.MaxQty)
	var wg sync.WaitGroup
	for g := range 64 {
		wg.Go(func() {
			inv := insts[g%len(insts)]
			for {
				qty := rand.Int64N(5) + 1
				err := inv.Decrement(t.Context(), sku, qty)
				switch {
				case err == nil:
					acked.Add(qty)
				case errors.Is(err, stockguard.ErrInsufficientStock):
					for m := minRefused.Load(); qty < m && !minRefused.CompareAndSwap(m, qty); m = minRefused.Load() {
					}
					if qty == 1 {
						return
					}
				default:
					t.Errorf("Decrement(%d): %v", qty, err)
					return
				}
			}
		})
	}
	wg.Wait()
	left, err := insts[len(insts)-1].Stock(t.Context(), sku)
	if err != nil {
		t.Fatal(err)
	}
	if gone := stock - left; gone != acked.Load() {
		t.Errorf("%d units gone, %d acknowledged", gone, acked.Load())
	}
	if left >= minRefused.Load() {
		t.Errorf("%d left at the end, yet a request for %d was refused", left, minRefused.Load())
	}
	var s BatchStats
	for _, b := range insts {
		idle(t, b)
		s.Batches += b.Stats().Batches
		s.Requests += b.Stats().Requests
	}
	t.Logf("%d units in %d requests in %d calls", acked.Load(), s.Requests, s.Batches)
	if s.Requests < 2*s.Batches {
		t.Errorf("%d requests in %d calls: mean batch below 2", s.Requests, s.Batches)
	}
}

// Two instances, as two processes, combine their own buyers' requests;
// Redis keeps the total exact, and batches of more than one form.
func TestBatched_Decrement_combinesAcrossInstances(t *testing.T) {
	rdb := backendstest.RedisClient(t)
	prefix := redistest.Prefix(t, rdb)
	drainMixed(t, []*Batched{NewBatched(rdb, WithPrefix(prefix)), NewBatched(rdb, WithPrefix(prefix))}, "hot", 5000)
}

func TestBatched_cluster_combinesAcrossInstances(t *testing.T) {
	rdb := clusterClient(t)
	prefix := redistest.Prefix(t, rdb)
	for _, sku := range []string{"hot", "{x}", "a}b{c"} {
		drainMixed(t, []*Batched{NewBatched(rdb, WithPrefix(prefix)), NewBatched(rdb, WithPrefix(prefix))}, sku, 2000)
	}
}

// Batched and Atomic share the stock key: both take from one level.
func TestBatched_sharesStockWithAtomic(t *testing.T) {
	rdb := backendstest.RedisClient(t)
	prefix := redistest.Prefix(t, rdb)
	a, b := NewAtomic(rdb, WithPrefix(prefix)), NewBatched(rdb, WithPrefix(prefix))
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
