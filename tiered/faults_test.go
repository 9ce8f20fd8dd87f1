package tiered

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/jmoiron/sqlx"
	"github.com/redis/go-redis/v9"

	"github.com/stockguard/stockguard"
	"github.com/stockguard/stockguard/internal/must"
	"github.com/stockguard/stockguard/mysqllock"
)

var errKilled = errors.New("consumer killed")

// killAt makes c stop, as if killed, at point of its next Step.
func killAt(c *Consumer, point string) {
	c.hook = func(p string) error {
		if p == point {
			return errKilled
		}
		return nil
	}
}

// takeN takes one unit of sku under IDs o0…o<n-1>.
func (r *rig) takeN(t *testing.T, sku string, n int) {
	t.Helper()
	for i := range n {
		if err := r.o.Take(t.Context(), "o"+string(rune('A'+i)), line(sku, 1)); err != nil {
			t.Fatal(err)
		}
	}
}

// stepUntilDrained steps c until the stream is empty.
func (r *rig) stepUntilDrained(t *testing.T, c *Consumer) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		left, err := r.q.Backlog(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		if len(left) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d entries left: %v", len(left), left)
		}
		if _, err := c.Step(t.Context()); err != nil {
			t.Fatal(err)
		}
	}
}

// A consumer killed between the back's commit and the acknowledgement: its
// entries are claimed by another once idle, applied again as no-ops.
func TestConsumer_killedAfterCommit_appliedOnce(t *testing.T) {
	r := newRig(t)
	stock(t, r.o, 100, "a")
	r.takeN(t, "a", 10)
	c1 := r.consumer(nil, WithConsumerName("c1"))
	killAt(c1, "committed")
	if _, err := c1.Step(t.Context()); !errors.Is(err, errKilled) {
		t.Fatalf("Step = %v, want the kill", err)
	}
	wantStock(t, "back after the commit", r.back, "a", 90)
	if left, _ := r.q.Backlog(t.Context()); len(left) != 10 {
		t.Fatalf("%d entries left, want 10 unacknowledged", len(left))
	}
	c2 := r.consumer(nil, WithConsumerName("c2"), WithClaimIdle(time.Millisecond))
	time.Sleep(5 * time.Millisecond)
	r.stepUntilDrained(t, c2)
	wantStock(t, "back after the redelivery", r.back, "a", 90)
	if s := c2.Stats(); s.Claimed != 10 || s.Applied != 10 {
		t.Errorf("c2 claimed %d, applied %d; want 10, 10", s.Claimed, s.Applied)
	}
	r.settled(t, "a")
}

// A consumer killed with entries read but not applied: another applies them.
func TestConsumer_killedBeforeCommit_appliedOnce(t *testing.T) {
	r := newRig(t)
	stock(t, r.o, 100, "a")
	r.takeN(t, "a", 10)
	c1 := r.consumer(nil, WithConsumerName("c1"))
	killAt(c1, "read")
	if _, err := c1.Step(t.Context()); !errors.Is(err, errKilled) {
		t.Fatalf("Step = %v, want the kill", err)
	}
	wantStock(t, "back before any commit", r.back, "a", 100)
	c2 := r.consumer(nil, WithConsumerName("c2"), WithClaimIdle(time.Millisecond))
	time.Sleep(5 * time.Millisecond)
	r.stepUntilDrained(t, c2)
	wantStock(t, "back", r.back, "a", 90)
	r.settled(t, "a")
}

// Each entry delivered twice (appended again, as a queue that delivers at
// least once may): the back applies each effect once.
func TestConsumer_entryDeliveredTwice_appliedOnce(t *testing.T) {
	r := newRig(t)
	stock(t, r.o, 100, "a", "b")
	if err := r.o.Take(t.Context(), "t1", line("a", 2), line("b", 1)); err != nil {
		t.Fatal(err)
	}
	if err := r.o.Take(t.Context(), "t2", line("a", 5)); err != nil {
		t.Fatal(err)
	}
	if err := r.o.Return(t.Context(), "t2"); err != nil {
		t.Fatal(err)
	}
	msgs, err := r.rdb.XRange(t.Context(), StreamKey(r.prefix), "-", "+").Result()
	if err != nil || len(msgs) != 3 {
		t.Fatalf("stream = %v, %v; want 3 entries", msgs, err)
	}
	for _, m := range msgs {
		if err := r.rdb.XAdd(t.Context(), &redis.XAddArgs{Stream: StreamKey(r.prefix), Values: m.Values}).Err(); err != nil {
			t.Fatal(err)
		}
	}
	c := r.consumer(nil, WithBatch(2)) // the copies come in other batches
	r.stepUntilDrained(t, c)
	wantStock(t, "back", r.back, "a", 98)
	wantStock(t, "back", r.back, "b", 99)
	if s := c.Stats(); s.Applied != 6 {
		t.Errorf("applied %d entries, want 6 (3 no-ops)", s.Applied)
	}
	r.settled(t, "a", "b")
}

// Drift injected behind the tiers' backs is reported with the orders in
// flight; Repair acknowledges what the back's ledger shows applied.
func TestReconciler_reportsInjectedDrift(t *testing.T) {
	r := newRig(t)
	rc := NewReconciler(r.o, r.q)
	stock(t, r.o, 100, "a", "b", "c")
	for id, l := range map[string]stockguard.Line{"t1": line("a", 2), "t2": line("a", 1), "t3": line("c", 4)} {
		if err := r.o.Take(t.Context(), id, l); err != nil {
			t.Fatal(err)
		}
	}
	if err := r.o.Hold(t.Context(), "h1", time.Minute, line("b", 3)); err != nil {
		t.Fatal(err)
	}
	rep, err := rc.Check(t.Context(), "a", "b", "c")
	if err != nil || len(rep.Drifts) != 0 || len(rep.Backlog) != 3 {
		t.Fatalf("Check before any drift = %+v, %v; want no drift, 3 in flight", rep, err)
	}

	// Lose t2's entry; take 2 units from b's back alone.
	for _, e := range rep.Backlog {
		if e.Order == "t2" {
			r.rdb.XDel(t.Context(), StreamKey(r.prefix), e.ID)
		}
	}
	if err := r.back.Decrement(t.Context(), "b", 2); err != nil {
		t.Fatal(err)
	}
	rep, err = rc.Check(t.Context(), "a", "b", "c")
	if err != nil {
		t.Fatal(err)
	}
	want := []Drift{
		{SKU: "a", Front: 97, Back: 100, InFlight: -2, Orders: []string{"t1"}, Diff: 1},
		{SKU: "b", Front: 100, Back: 98, Diff: -2},
	}
	if !slices.EqualFunc(rep.Drifts, want, func(x, y Drift) bool {
		return x.SKU == y.SKU && x.Front == y.Front && x.Back == y.Back && x.InFlight == y.InFlight && x.Diff == y.Diff && slices.Equal(x.Orders, y.Orders)
	}) {
		t.Errorf("drifts = %+v\nwant     %+v", rep.Drifts, want)
	}

	// A consumer killed after the commit: Repair acknowledges its entries.
	c := r.consumer(nil)
	killAt(c, "committed")
	if _, err := c.Step(t.Context()); !errors.Is(err, errKilled) {
		t.Fatalf("Step = %v, want the kill", err)
	}
	fixed, err := rc.Repair(t.Context())
	if err != nil || len(fixed) != 2 {
		t.Fatalf("Repair = %v, %v; want t1's and t3's entries", fixed, err)
	}
	if left, _ := r.q.Backlog(t.Context()); len(left) != 0 {
		t.Errorf("backlog after Repair: %v", left)
	}
	rep, err = rc.Check(t.Context(), "c")
	if err != nil || len(rep.Drifts) != 0 {
		t.Errorf("Check of c after Repair = %+v, %v", rep, err)
	}
}

// proxy forwards TCP to a MySQL server and can cut every connection.
type proxy struct {
	ln     net.Listener
	target string
	dsn    *mysql.Config
	mu     sync.Mutex
	isDown bool
	conns  []net.Conn
}

func newProxy(t *testing.T, dsn string) *proxy {
	cfg, err := mysql.ParseDSN(dsn)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &proxy{ln: ln, target: cfg.Addr, dsn: cfg}
	t.Cleanup(func() { ln.Close(); p.down() })
	go p.serve()
	return p
}

func (p *proxy) serve() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		if p.isDown {
			p.mu.Unlock()
			c.Close()
			continue
		}
		s, err := net.Dial("tcp", p.target)
		if err != nil {
			p.mu.Unlock()
			c.Close()
			continue
		}
		p.conns = append(p.conns, c, s)
		p.mu.Unlock()
		go func() { io.Copy(s, c); s.Close() }()
		go func() { io.Copy(c, s); c.Close() }()
	}
}

// down cuts every connection and refuses new ones until up.
func (p *proxy) down() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.isDown = true
	for _, c := range p.conns {
		c.Close()
	}
	p.conns = nil
}

func (p *proxy) up() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.isDown = false
}

// db opens a pool through the proxy, with short timeouts so that a cut
// is seen at once.
func (p *proxy) db(t *testing.T) *sqlx.DB {
	cfg := p.dsn.Clone()
	cfg.Addr = p.ln.Addr().String()
	cfg.InterpolateParams, cfg.MultiStatements = true, true
	cfg.Timeout, cfg.ReadTimeout, cfg.WriteTimeout = time.Second, 5*time.Second, 5*time.Second
	db, err := sqlx.Open("mysql", cfg.FormatDSN())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// mysqlBack is the rig's back over another pool.
func mysqlBack(db *sqlx.DB, table string) stockguard.Orders {
	return must.New(mysqllock.NewBatched(db, mysqllock.WithTable(table)))
}

// An entry the back refuses for good (it has the ID for another order)
// stays pending, counted Stuck, and in the backlog the reconciler reads;
// the entries around it are applied.
func TestConsumer_mismatchOnBack_staysPending(t *testing.T) {
	r := newRig(t)
	stock(t, r.o, 10, "a", "b")
	if err := r.back.Take(t.Context(), "x", line("a", 1)); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"before", "x", "after"} {
		if err := r.o.Take(t.Context(), id, line("b", 1)); err != nil {
			t.Fatal(err)
		}
	}
	c := r.consumer(nil)
	for range 3 {
		if _, err := c.Step(t.Context()); err != nil {
			t.Fatal(err)
		}
	}
	if s := c.Stats(); s.Applied != 2 || s.Stuck != 1 || s.Pending != 1 {
		t.Errorf("stats %+v; want 2 applied, 1 stuck and pending", s)
	}
	rep, err := NewReconciler(r.o, r.q).Check(t.Context(), "b")
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Backlog) != 1 || rep.Backlog[0].Order != "x" || len(rep.Drifts) != 0 {
		t.Errorf("report %+v; want x in the backlog, explaining b's difference", rep)
	}
}

// Entries delivered to a consumer whose reply never arrived (a cut
// connection, or a process that died under the same name) are applied by
// that consumer's next read, not left to a claim a claim-idle later.
func TestConsumer_lostReadReply_appliedByTheNextRead(t *testing.T) {
	r := newRig(t)
	stock(t, r.o, 100, "a")
	r.takeN(t, "a", 5)
	// The read whose reply is lost: delivered to c1, never seen by it.
	if err := r.rdb.XReadGroup(t.Context(), &redis.XReadGroupArgs{
		Group: DefaultGroup, Consumer: "c1", Streams: []string{r.q.stream, ">"}, Count: 100, Block: -1,
	}).Err(); err != nil {
		t.Fatal(err)
	}
	c1 := r.consumer(nil, WithConsumerName("c1"))
	n, err := c1.Step(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if n != 5 {
		t.Fatalf("Step acknowledged %d entries, want the 5 delivered before", n)
	}
	wantStock(t, "back", r.back, "a", 95)
}

// Run whose context ends while a batch is in hand applies and acknowledges
// that batch before it returns, within WithStopGrace; with no grace the
// batch is cut, left pending under the consumer's name.
func TestConsumer_Run_stopsAfterTheBatchInHand(t *testing.T) {
	for _, c := range []struct {
		grace time.Duration
		left  int
	}{{DefaultStopGrace, 0}, {0, 5}} {
		t.Run(fmt.Sprint("grace=", c.grace), func(t *testing.T) {
			r := newRig(t)
			stock(t, r.o, 10, "a")
			r.takeN(t, "a", 5)
			cons := r.consumer(nil, WithStopGrace(c.grace))
			ctx, cancel := context.WithCancel(t.Context())
			cons.hook = func(p string) error {
				if p == "read" {
					cancel() // the service told to stop, five entries in hand
				}
				return nil
			}
			if err := cons.Run(ctx); err != nil {
				t.Fatal(err)
			}
			left, err := r.q.Backlog(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			if len(left) != c.left {
				t.Fatalf("%d entries left after Run, want %d: %v", len(left), c.left, left)
			}
			if c.left == 0 {
				wantStock(t, "back", r.back, "a", 5)
			}
		})
	}
}

// A Return entry whose Take the back refuses for good (the back has the ID
// for another order) is never applied: not in the Take's batch, not in a
// later one; the back's order keeps its units.
func TestConsumer_returnOfAMismatchedOrder_neverReturnsTheBacksOrder(t *testing.T) {
	ctx := t.Context()
	r := newRig(t)
	stock(t, r.o, 10, "a", "b")
	if err := r.back.Take(ctx, "x", line("a", 1)); err != nil { // the back's own order under x
		t.Fatal(err)
	}
	if err := r.o.Take(ctx, "x", line("b", 2)); err != nil {
		t.Fatal(err)
	}
	if err := r.o.Return(ctx, "x"); err != nil {
		t.Fatal(err)
	}
	c := r.consumer(nil)
	now := time.Now()
	c.now = func() time.Time { return now }
	for range 3 {
		if _, err := c.Step(ctx); err != nil {
			t.Fatal(err)
		}
		now = now.Add(retryEvery) // the refused entries are due again
	}
	if info, err := r.back.Order(ctx, "x"); err != nil || info.State != stockguard.OrderTaken {
		t.Errorf("the back's Order(x) = %+v, %v; want its own order, taken", info, err)
	}
	wantStock(t, "back", r.back, "a", 9)
	wantStock(t, "back", r.back, "b", 10)
	if s := c.Stats(); s.Applied != 0 || s.Stuck != 1 || s.Pending != 2 {
		t.Errorf("stats %+v; want nothing applied, the take stuck, the return waiting behind it", s)
	}

	// The back takes the ID for another order after the front did: the
	// return is refused as well.
	if err := r.o.Take(ctx, "y", line("b", 1)); err != nil {
		t.Fatal(err)
	}
	if err := r.back.Take(ctx, "y", line("a", 2)); err != nil {
		t.Fatal(err)
	}
	if err := r.o.Return(ctx, "y"); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if _, err := c.Step(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if info, err := r.back.Order(ctx, "y"); err != nil || info.State != stockguard.OrderTaken {
		t.Errorf("the back's Order(y) = %+v, %v; want its own order, taken", info, err)
	}
	wantStock(t, "back", r.back, "a", 7)
}
