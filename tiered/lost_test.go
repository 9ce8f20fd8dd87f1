package tiered

import (
	"errors"
	"testing"
	"time"

	"github.com/stockguard/stockguard"
	"github.com/stockguard/stockguard/internal/backends"
	"github.com/stockguard/stockguard/internal/backends/backendstest"
	"github.com/stockguard/stockguard/internal/must"
	"github.com/stockguard/stockguard/mysqllock"
)

// lostRig is a tiered Orders whose front is a private Redis without
// persistence, restarted (empty) by restart.
type lostRig struct {
	srv   *backends.Redis
	table string // the back's table (mysqllock's or pglock's)
	back  stockguard.Orders
	o     *Orders
	q     *Streams
	c     *Consumer
}

// lostLease is the apply lease of a lostRig's Orders and consumers: Recover
// waits for it.
const lostLease = 500 * time.Millisecond

func newLostRig(t *testing.T) *lostRig {
	t.Helper()
	db := backendstest.DB(t, multi)
	table := newTable(t, db)
	return newLostRigOn(t, table, must.New(mysqllock.NewBatched(db, mysqllock.WithTable(table))))
}

// newLostRigOn is a lostRig whose back is back, on table.
func newLostRigOn(t *testing.T, table string, back stockguard.Orders) *lostRig {
	t.Helper()
	srv := backendstest.PrivateRedis(t, 1)[0]
	rdb := srv.Client()
	t.Cleanup(func() { rdb.Close() })
	r := &lostRig{srv: srv, table: table, back: back}
	r.o = must.New(New(rdb, r.back, WithPrefix("shop:"), WithApplyLease(lostLease)))
	r.q = NewStreams(rdb, StreamKey("shop:"), DefaultGroup)
	r.c = must.New(NewConsumer(rdb, r.back, WithPrefix("shop:"), WithConsumerName("c1"), WithApplyLease(lostLease)))
	if err := r.o.Setup(t.Context()); err != nil {
		t.Fatal(err)
	}
	return r
}

// restart stops the front and starts it again on its port, empty.
func (r *lostRig) restart(t *testing.T) {
	t.Helper()
	if err := r.srv.Restart(t.Context()); err != nil {
		t.Fatal(err)
	}
}

// applied steps the consumer until the stream is empty.
func (r *lostRig) applied(t *testing.T) {
	t.Helper()
	for {
		left, err := r.q.Backlog(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		if len(left) == 0 {
			return
		}
		if _, err := r.c.Step(t.Context()); err != nil {
			t.Fatal(err)
		}
	}
}

// A front restarted without persistence has lost the orders the back had
// not applied yet: every call of the Orders, and the Consumer, refuse with
// ErrFrontLost (an ErrUnavailable) instead of selling again units the
// back may have sold, or recreating the group as if nothing happened.
func TestOrders_frontRestartedEmpty_refusesWithErrFrontLost(t *testing.T) {
	ctx := t.Context()
	r := newLostRig(t)
	stock(t, r.o, 10, "a")
	if err := r.o.Take(ctx, "applied-1", line("a", 2)); err != nil {
		t.Fatal(err)
	}
	r.applied(t)
	if err := r.o.Take(ctx, "acked-1", line("a", 3)); err != nil {
		t.Fatal(err)
	}
	r.restart(t)

	check := func(what string, err error) {
		t.Helper()
		if !errors.Is(err, ErrFrontLost) || !errors.Is(err, stockguard.ErrUnavailable) {
			t.Errorf("%s on a front restarted empty = %v, want ErrFrontLost (ErrUnavailable)", what, err)
		}
	}
	_, err := r.c.Step(ctx)
	check("Consumer.Step", err)
	_, err = r.c.Step(ctx) // and again: the group is not recreated
	check("Consumer.Step again", err)
	if s := r.c.Stats(); s.FrontLost != 2 {
		t.Errorf("Stats.FrontLost = %d, want 2", s.FrontLost)
	}
	check("SetStock", r.o.SetStock(ctx, "a", 10))
	check("Restock", r.o.Restock(ctx, "r1", "a", 1))
	check("Take", r.o.Take(ctx, "new-1", line("a", 1)))
	check("Hold", r.o.Hold(ctx, "new-2", time.Minute, line("a", 1)))
	check("Confirm", r.o.Confirm(ctx, "acked-1"))
	check("Return", r.o.Return(ctx, "acked-1"))
	_, err = r.o.Order(ctx, "acked-1")
	check("Order", err)
	_, err = r.o.Stock(ctx, "a")
	check("Stock", err)
	_, err = NewReconciler(r.o, r.q).Check(ctx, "a")
	check("Reconciler.Check", err)
	if n := r.o.FrontLost(); n != 9 {
		t.Errorf("Orders.FrontLost = %d, want 9", n)
	}
	wantStock(t, "back", r.back, "a", 8)
}

// Recover re-seeds a front restarted empty from the back: the back's
// levels, and the back's orders recorded, so a retry is answered and not
// taken again; the Consumer goes on, and the tiers agree.
func TestOrders_Recover_reseedsTheFrontFromTheBack(t *testing.T) {
	ctx := t.Context()
	r := newLostRig(t)
	stock(t, r.o, 10, "a", "b")
	if err := r.o.Take(ctx, "applied-1", line("a", 2), line("b", 1)); err != nil {
		t.Fatal(err)
	}
	if err := r.o.Take(ctx, "returned-1", line("a", 1)); err != nil {
		t.Fatal(err)
	}
	if err := r.o.Return(ctx, "returned-1"); err != nil {
		t.Fatal(err)
	}
	r.applied(t)
	if err := r.o.Take(ctx, "acked-1", line("a", 3)); err != nil { // lost with the front
		t.Fatal(err)
	}
	if err := r.o.Hold(ctx, "held-1", time.Minute, line("b", 1)); err != nil { // lost too
		t.Fatal(err)
	}
	r.restart(t)
	if _, err := r.c.Step(ctx); !errors.Is(err, ErrFrontLost) {
		t.Fatalf("Step = %v, want ErrFrontLost", err)
	}

	ids := []string{"applied-1", "returned-1", "acked-1", "held-1"}
	if err := r.o.Recover(ctx, []string{"a"}, ids); err != nil {
		t.Fatal(err)
	}
	wantStock(t, "front", r.o, "a", 8)
	wantStock(t, "front", r.o, "b", 9)
	// Retries are answered from the records Recover wrote.
	if err := r.o.Take(ctx, "applied-1", line("a", 2), line("b", 1)); err != nil {
		t.Errorf("retried Take of an order the back took = %v, want nil", err)
	}
	if err := r.o.Take(ctx, "applied-1", line("a", 1)); !errors.Is(err, stockguard.ErrOrderMismatch) {
		t.Errorf("Take of an order the back took, other lines = %v, want ErrOrderMismatch", err)
	}
	if err := r.o.Take(ctx, "returned-1", line("a", 1)); !errors.Is(err, stockguard.ErrOrderClosed) {
		t.Errorf("retried Take of an order the back returned = %v, want ErrOrderClosed", err)
	}
	if info, err := r.o.Order(ctx, "applied-1"); err != nil || info.State != stockguard.OrderTaken {
		t.Errorf("Order(applied-1) = %+v, %v; want taken", info, err)
	}
	wantStock(t, "front after the retries", r.o, "a", 8)
	wantStock(t, "front after the retries", r.o, "b", 9)

	// The Consumer goes on with the new stream; the tiers agree.
	if err := r.o.Take(ctx, "new-1", line("a", 1)); err != nil {
		t.Fatal(err)
	}
	r.applied(t)
	wantStock(t, "back", r.back, "a", 7)
	wantStock(t, "back", r.back, "b", 9)
	rep, err := NewReconciler(r.o, r.q).Check(ctx, "a", "b")
	if err != nil || len(rep.Drifts) != 0 || len(rep.Backlog) != 0 {
		t.Errorf("Check = %+v, %v; want the tiers in agreement", rep, err)
	}
	if s := r.c.Stats(); s.FrontLost != 1 || s.Applied != 4 {
		t.Errorf("consumer stats %+v; want 1 loss, 4 entries applied", s)
	}
	if err := r.o.Recover(ctx, []string{"a"}, ids); !errors.Is(err, stockguard.ErrInvalidRequest) {
		t.Errorf("Recover of a front with its epoch = %v, want ErrInvalidRequest", err)
	}
}
