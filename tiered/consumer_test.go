package tiered

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/stockguard/stockguard"
	"github.com/stockguard/stockguard/internal/backends/backendstest"
	"github.com/stockguard/stockguard/internal/netgate"
	"github.com/stockguard/stockguard/internal/redistest"
)

// countingBack counts the Takes its consumer sends to the back.
type countingBack struct {
	stockguard.Orders
	takes atomic.Int64
}

func (b *countingBack) Take(ctx context.Context, id string, lines ...stockguard.Line) error {
	b.takes.Add(1)
	return b.Orders.Take(ctx, id, lines...)
}

// frozen sets c's clock to a fixed instant: entries left for later are
// never due again.
func frozen(c *Consumer) {
	now := time.Now()
	c.now = func() time.Time { return now }
}

// A consumer restarted under its name whose own pending entries fill a
// batch the back keeps refusing reads the new entries behind them, and
// sends the refused ones to the back only when they are due again.
func TestConsumer_restartedUnderItsName_readsNewEntriesBehindRefusedOnes(t *testing.T) {
	ctx := t.Context()
	r := newRig(t)
	stock(t, r.o, 10, "a")
	if err := r.o.call(ctx, "", func(ctx context.Context) error { return r.o.front.SetStock(ctx, "z", 10) }); err != nil { // the back lacks z
		t.Fatal(err)
	}
	for _, id := range []string{"z1", "z2"} {
		if err := r.o.Take(ctx, id, line("z", 1)); err != nil {
			t.Fatal(err)
		}
	}
	first := r.consumer(nil, WithConsumerName("c1"), WithBatch(2))
	if _, err := first.Step(ctx); err != nil { // z1, z2 refused, pending under c1
		t.Fatal(err)
	}
	if err := r.o.Take(ctx, "n1", line("a", 1)); err != nil {
		t.Fatal(err)
	}
	back := &countingBack{Orders: r.back}
	again := r.consumer(back, WithConsumerName("c1"), WithBatch(2)) // c1 restarted
	frozen(again)
	for range 4 {
		if _, err := again.Step(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if info, err := r.back.Order(ctx, "n1"); err != nil || info.State != stockguard.OrderTaken {
		t.Errorf("the back's Order(n1) = %+v, %v; want taken", info, err)
	}
	// z1 and z2 once each (read back as own pending), n1 once; then
	// nothing is due.
	if n := back.takes.Load(); n != 3 {
		t.Errorf("the back was sent %d takes in 4 steps, want 3", n)
	}
}

// XAUTOCLAIM examines at most ten times its count of pending entries: a
// dead consumer's entry behind ten that are not idle yet is claimed by the
// next call, which goes on from where the last one stopped.
func TestConsumer_claim_goesOnPastTheHeadOfThePendingList(t *testing.T) {
	ctx := t.Context()
	r := newRig(t)
	stock(t, r.o, 100, "a")
	r.takeN(t, "a", 11)
	msgs, err := r.rdb.XReadGroup(ctx, &redis.XReadGroupArgs{
		Group: DefaultGroup, Consumer: "live", Streams: []string{r.q.stream, ">"}, Count: 100, Block: -1,
	}).Result()
	if err != nil {
		t.Fatal(err)
	}
	// The last one belongs to a consumer dead for an hour.
	last := msgs[0].Messages[10].ID
	if err := r.rdb.Do(ctx, "XCLAIM", r.q.stream, DefaultGroup, "dead", 0, last, "IDLE", time.Hour.Milliseconds(), "JUSTID").Err(); err != nil {
		t.Fatal(err)
	}
	c := r.consumer(nil, WithConsumerName("c"), WithBatch(1), WithClaimIdle(time.Minute))
	for range 2 {
		if _, err := c.Step(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if s := c.Stats(); s.Claimed != 1 || s.Applied != 1 {
		t.Errorf("stats %+v; want the dead consumer's entry claimed and applied", s)
	}
	wantStock(t, "back", r.back, "a", 99)
}

// After an acknowledgement that failed, the consumer reads its own
// pending entries again at its next Step — applies them again, no-ops on
// the back, and acknowledges them — instead of leaving them a claim-idle.
func TestConsumer_failedAck_rereadsItsOwnEntriesNextStep(t *testing.T) {
	ctx := t.Context()
	r := newRig(t)
	stock(t, r.o, 100, "a")
	r.takeN(t, "a", 5)
	rdb := backendstest.RedisClient(t)
	// Every script the client runs — the consumer's acknowledgement — fails
	// unsent while armed.
	var armed atomic.Bool
	rdb.AddHook(redistest.OnProcess(func(_ context.Context, cmd redis.Cmder) error {
		if name := cmd.Name(); (name == "evalsha" || name == "eval") && armed.Load() {
			return &net.OpError{Op: "write", Net: "tcp", Err: errors.New("connection cut by the test")}
		}
		return nil
	}))
	c, err := NewConsumer(rdb, r.back, WithPrefix(r.prefix), WithConsumerName("c1"))
	if err != nil {
		t.Fatal(err)
	}
	armed.Store(true)
	if _, err := c.Step(ctx); err == nil {
		t.Fatal("Step with its acknowledgement cut = nil, want the error")
	}
	armed.Store(false)
	n, err := c.Step(ctx)
	if err != nil || n != 5 {
		t.Fatalf("next Step = %d, %v; want the 5 entries acknowledged", n, err)
	}
	if left, err := r.q.Backlog(ctx); err != nil || len(left) != 0 {
		t.Errorf("backlog %v, %v; want empty", left, err)
	}
	wantStock(t, "back", r.back, "a", 95)
}

// A read whose bytes reach Redis after its caller gave up, and after the
// consumer's next reads, hands the entries it reads to the consumer all
// the same: the consumer's reads after a failure look at its own pending
// entries again, and find them, instead of leaving them a claim-idle.
func TestStreams_readDeliveredLate_entriesReadBackWithinTheClaimIdle(t *testing.T) {
	ctx := t.Context()
	r := newRig(t)
	stock(t, r.o, 100, "a")
	gate := netgate.New(t)
	var dialled atomic.Bool
	// The first connection goes through the gate, the later ones straight.
	rdb := redis.NewClient(&redis.Options{Addr: backendstest.SharedRedis(t).Addr, PoolSize: 1, ReadTimeout: 200 * time.Millisecond,
		Dialer: func(ctx context.Context, network, addr string) (net.Conn, error) {
			if dialled.CompareAndSwap(false, true) {
				return gate.Dial(ctx, network, addr)
			}
			return (&net.Dialer{}).DialContext(ctx, network, addr)
		}})
	t.Cleanup(func() { rdb.Close() })
	q := NewStreams(rdb, StreamKey(r.prefix), DefaultGroup)
	if _, _, err := q.Read(ctx, "c1", 10, -1); err != nil { // caught up: nothing pending, nothing new
		t.Fatal(err)
	}
	gate.Hold()
	if got, _, err := q.Read(ctx, "c1", 10, -1); err == nil {
		t.Fatalf("a read held on its way = %v, nil; want its timeout", got)
	}
	if got, _, err := q.Read(ctx, "c1", 10, -1); err != nil || len(got) != 0 {
		t.Fatalf("the next read = %v, %v; want nothing yet", got, err)
	}
	r.takeN(t, "a", 2)
	gate.Release()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		p, err := r.rdb.XPending(ctx, StreamKey(r.prefix), DefaultGroup).Result()
		if err != nil {
			t.Fatal(err)
		}
		if p.Count == 2 {
			break // the late read delivered the 2 entries to c1
		}
		if time.Now().After(deadline) {
			t.Fatalf("the late read never ran: %+v", p)
		}
	}
	got, _, err := q.Read(ctx, "c1", 10, -1)
	if err != nil || len(got) != 2 {
		t.Fatalf("a read after the late one = %v, %v; want the 2 entries it delivered", got, err)
	}
}

// takeAfter is a back whose Take of order first waits until a Take of
// order then was sent (or a second passed): the back's commits in another
// order than the stream's.
type takeAfter struct {
	stockguard.Orders
	first, then string
	sent        chan struct{}
	once        sync.Once
}

func (b *takeAfter) Take(ctx context.Context, id string, lines ...stockguard.Line) error {
	switch id {
	case b.first:
		select {
		case <-b.sent:
		case <-time.After(time.Second):
		}
	case b.then:
		defer b.once.Do(func() { close(b.sent) })
	}
	return b.Orders.Take(ctx, id, lines...)
}

// A Take behind a Return in the stream never goes to the back before that
// Return: it could take the units the Take before the Return needs, and
// that Take, refused, would hold its own Return back for good.
func TestConsumer_takeBehindAReturn_waitsForIt(t *testing.T) {
	ctx := t.Context()
	r := newRig(t)
	stock(t, r.o, 2, "a")
	if err := r.o.Take(ctx, "A", line("a", 2)); err != nil {
		t.Fatal(err)
	}
	if err := r.o.Return(ctx, "A"); err != nil {
		t.Fatal(err)
	}
	if err := r.o.Take(ctx, "B", line("a", 2)); err != nil { // the units A gave back
		t.Fatal(err)
	}
	c := r.consumer(&takeAfter{Orders: r.back, first: "A", then: "B", sent: make(chan struct{})})
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); {
		if _, err := c.Step(ctx); err != nil {
			t.Fatal(err)
		}
		if left, err := r.q.Backlog(ctx); err != nil || len(left) == 0 {
			break
		}
	}
	r.settled(t, "a")
	wantStock(t, "back", r.back, "a", 0)
}

// takes stocks "a" with 100 units and takes n of them, one an order, "o0"
// to "o<n-1>": n entries in the stream.
func (r *rig) takes(t *testing.T, n int) {
	t.Helper()
	stock(t, r.o, 100, "a")
	for i := range n {
		if err := r.o.Take(t.Context(), fmt.Sprint("o", i), line("a", 1)); err != nil {
			t.Fatal(err)
		}
	}
}

// entriesRead counts the stream entries its client's replies carried.
type entriesRead struct {
	entries, cmds atomic.Int64
}

func (h *entriesRead) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *entriesRead) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		err := next(ctx, cmd)
		h.cmds.Add(1)
		if c, ok := cmd.(*redis.XMessageSliceCmd); ok {
			h.entries.Add(int64(len(c.Val())))
		}
		return err
	}
}

func (h *entriesRead) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// Drain polls how many entries are left, never the entries themselves: a
// backlog read whole at every poll would cost Redis and the caller the
// backlog's size a hundred times a second, while the consumer it waits for
// needs them to apply it.
func TestDrain_pollsWithoutReadingTheBacklog(t *testing.T) {
	ctx := t.Context()
	r := newRig(t)
	r.takes(t, 50)
	opts := *r.rdb.Options()
	rdb := redis.NewClient(&opts)
	t.Cleanup(func() { rdb.Close() })
	h := &entriesRead{}
	rdb.AddHook(h)
	done := make(chan error, 1)
	go func() { done <- Drain(ctx, NewStreams(rdb, StreamKey(r.prefix), DefaultGroup)) }()
	for h.cmds.Load() < 3 { // three polls of the backlog, then the consumer
		time.Sleep(time.Millisecond)
	}
	run(t, r.consumer(nil))
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if n := h.entries.Load(); n > 0 {
		t.Errorf("Drain read %d entries over %d commands, want none: it polls their number", n, h.cmds.Load())
	}
	wantStock(t, "back", r.back, "a", 50)
}

// Ack leaves the stream holding exactly the entries not acknowledged,
// whichever order they are acknowledged in: those before the oldest
// pending one go by a trim, the others one by one, and none delivered to
// no consumer yet goes with them.
func TestStreams_ack_leavesExactlyTheEntriesNotAcknowledged(t *testing.T) {
	ctx := t.Context()
	r := newRig(t)
	r.takes(t, 8)
	read, epoch, err := r.q.Read(ctx, "c1", 6, -1)
	if err != nil || len(read) != 6 {
		t.Fatalf("Read = %d entries, %v; want 6", len(read), err)
	}
	left := func(want ...int) {
		t.Helper()
		got, err := r.q.Backlog(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var orders []string
		for _, e := range got {
			orders = append(orders, e.Order)
		}
		var wants []string
		for _, i := range want {
			wants = append(wants, fmt.Sprint("o", i))
		}
		if fmt.Sprint(orders) != fmt.Sprint(wants) {
			t.Fatalf("backlog %v, want %v", orders, wants)
		}
		if n, err := r.q.Len(ctx); err != nil || n != int64(len(want)) {
			t.Fatalf("Len = %d, %v; want %d", n, err, len(want))
		}
	}
	for _, step := range []struct {
		ack  []int // indexes into read
		left []int
	}{
		{[]int{1, 3}, []int{0, 2, 4, 5, 6, 7}}, // after the oldest pending: one by one
		{[]int{3}, []int{0, 2, 4, 5, 6, 7}},    // acknowledged again: nothing more
		{[]int{0}, []int{2, 4, 5, 6, 7}},       // the oldest: trimmed up to the next pending
		{[]int{5, 2}, []int{4, 6, 7}},          // on both sides of the oldest pending
		{[]int{4}, []int{6, 7}},                // none pending: the two never delivered stay
	} {
		var es []Entry
		for _, i := range step.ack {
			es = append(es, read[i])
		}
		if err := r.q.Ack(ctx, epoch, es...); err != nil {
			t.Fatal(err)
		}
		left(step.left...)
	}
}
