package tiered

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/stockguard/stockguard"
	"github.com/stockguard/stockguard/internal/must"
)

// gatedBack holds the Takes sent to the back until open is closed, as a
// slow network to the database would; a Take whose caller's deadline has
// passed by then is not applied (the back refuses work its caller gave up
// on). entered is closed when the first Take arrives.
type gatedBack struct {
	stockguard.Orders
	entered, open chan struct{}
	once          sync.Once
}

func newGatedBack(back stockguard.Orders) *gatedBack {
	return &gatedBack{Orders: back, entered: make(chan struct{}), open: make(chan struct{})}
}

func (b *gatedBack) Take(ctx context.Context, id string, lines ...stockguard.Line) error {
	b.once.Do(func() { close(b.entered) })
	select {
	case <-b.open:
	case <-ctx.Done():
	}
	if dl, ok := ctx.Deadline(); ok && !time.Now().Before(dl) {
		return fmt.Errorf("%w: the back's deadline passed", stockguard.ErrOutcomeUnknown)
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	return b.Orders.Take(ctx, id, lines...)
}

// agree checks that the front's level plus held units of each sku is the
// back's level, once the consumer c has drained the stream.
func (r *lostRig) agree(t *testing.T, c *Consumer, skus ...string) {
	t.Helper()
	ctx := t.Context()
	for {
		left, err := r.q.Backlog(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(left) == 0 {
			break
		}
		if _, err := c.Step(ctx); err != nil {
			t.Fatal(err)
		}
	}
	for _, sku := range skus {
		tiersAgree(t, r.o, r.back, sku)
	}
}

// tiersAgree checks that the front's level plus held units of sku is the
// back's level.
func tiersAgree(t *testing.T, o *Orders, back stockguard.Orders, sku string) {
	t.Helper()
	ctx := t.Context()
	var level, held int64
	err := o.call(ctx, "", func(ctx context.Context) (err error) { level, held, err = o.front.Held(ctx, sku); return err })
	if err != nil {
		t.Fatal(err)
	}
	n, err := back.Stock(ctx, sku)
	if err != nil {
		t.Fatal(err)
	}
	if level+held != n {
		t.Errorf("%s: front %d + held %d, back %d: the tiers disagree", sku, level, held, n)
	}
}

// A consumer's batch read before the front was lost, held on its way to
// the back while Recover runs, never lands after Recover read the back:
// Recover fences the lost front's consumers, and the tiers agree after it.
func TestRecover_fencesABatchOnItsWayToTheBack(t *testing.T) {
	ctx := t.Context()
	r := newLostRig(t)
	stock(t, r.o, 10, "a")
	if err := r.o.Take(ctx, "acked-1", line("a", 3)); err != nil {
		t.Fatal(err)
	}
	gate := newGatedBack(r.back)
	slow := must.New(NewConsumer(r.srv.Client(), gate, WithPrefix("shop:"), WithConsumerName("slow"), WithApplyLease(lostLease)))
	stepped := make(chan error, 1)
	go func() { _, err := slow.Step(ctx); stepped <- err }()
	<-gate.entered // the batch is on its way to the back
	r.restart(t)
	recovered := r.o.Recover(ctx, []string{"a"}, nil)
	close(gate.open)
	<-stepped
	if recovered != nil {
		t.Fatalf("Recover = %v", recovered)
	}
	r.agree(t, slow, "a")
	if info, err := r.back.Order(ctx, "acked-1"); err == nil {
		t.Errorf("the lost front's order reached the back after Recover: %+v", info)
	}
	// Its next Step finds the new epoch and drops the entry it kept.
	if _, err := slow.Step(ctx); err != nil {
		t.Fatal(err)
	}
	if s := slow.Stats(); s.FrontLost != 1 || s.Dropped != 1 || s.Pending != 0 {
		t.Errorf("consumer stats %+v: want the lost front's entry dropped and counted", s)
	}
	r.agree(t, slow, "a")
}

// returnHook runs inject once, right after the front has run the Return
// of order id.
type returnHook struct {
	id     string
	once   sync.Once
	inject func()
}

func (h *returnHook) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *returnHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

func (h *returnHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		err := next(ctx, cmd)
		name := strings.ToLower(cmd.Name())
		if err != nil || (name != "evalsha" && name != "eval") {
			return err
		}
		// orders_act.lua's arguments: "return", the retention, the ID; a
		// batch's (orders_batch.lua): "R", the ID.
		args := cmd.Args()
		for i := 3; i+1 < len(args); i++ {
			if args[i] == "return" && i+2 < len(args) && args[i+2] == h.id || args[i] == "R" && args[i+1] == h.id {
				h.once.Do(h.inject)
			}
		}
		return err
	}
}

// A sale right after Recover replayed a returned order — its units back on
// sale until Recover's last step — is refused, or Recover's result
// accounts for it: the tiers agree either way.
func TestRecover_saleAfterAReplayedReturn_tiersAgree(t *testing.T) {
	ctx := t.Context()
	r := newLostRig(t)
	stock(t, r.o, 10, "a")
	if err := r.o.Take(ctx, "returned-1", line("a", 1)); err != nil {
		t.Fatal(err)
	}
	if err := r.o.Return(ctx, "returned-1"); err != nil {
		t.Fatal(err)
	}
	r.applied(t)
	r.restart(t)

	sale := errors.New("not injected")
	hooked := r.srv.Client()
	t.Cleanup(func() { hooked.Close() })
	hooked.AddHook(&returnHook{id: "returned-1", inject: func() {
		sale = r.o.Take(ctx, "sale-1", line("a", 1))
	}})
	rec := must.New(New(hooked, r.back, WithPrefix("shop:"), WithApplyLease(lostLease)))
	if err := rec.Recover(ctx, []string{"a"}, []string{"returned-1"}); err != nil {
		t.Fatalf("Recover = %v", err)
	}
	if sale == nil {
		t.Log("the sale during Recover was accepted")
	} else if !errors.Is(sale, ErrFrontLost) { // or not injected: Recover replayed no Return
		t.Errorf("a sale during Recover = %v, want nil or ErrFrontLost", sale)
	}
	r.agree(t, r.c, "a")
	if _, err := r.back.Order(ctx, "sale-1"); (err == nil) != (sale == nil) {
		t.Errorf("the sale answered %v, and the back's Order(sale-1) = %v", sale, err)
	}
}

// applyAll steps c until the stream is empty.
func (r *rig) applyAll(t *testing.T, c *Consumer) {
	t.Helper()
	for {
		left, err := r.q.Backlog(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		if len(left) == 0 {
			return
		}
		if _, err := c.Step(t.Context()); err != nil {
			t.Fatal(err)
		}
	}
}

// A front that lost only its epoch key (a failover to a replica that
// lacked it) still has orders on their way in its stream: Recover applies
// them to the back before it reads the back, and the tiers agree.
func TestRecover_frontThatLostOnlyItsEpoch_appliesTheStreamFirst(t *testing.T) {
	ctx := t.Context()
	r := newLostRig(t)
	stock(t, r.o, 10, "a")
	if err := r.o.Take(ctx, "acked-1", line("a", 3)); err != nil {
		t.Fatal(err)
	}
	if err := r.srv.Client().Del(ctx, EpochKey(r.o.stream)).Err(); err != nil {
		t.Fatal(err)
	}
	if _, err := r.c.Step(ctx); !errors.Is(err, ErrFrontLost) {
		t.Fatalf("Step = %v, want ErrFrontLost", err)
	}
	if err := r.o.Recover(ctx, []string{"a"}, nil); err != nil {
		t.Fatalf("Recover = %v", err)
	}
	if info, err := r.back.Order(ctx, "acked-1"); err != nil || info.State != stockguard.OrderTaken {
		t.Errorf("the back's Order(acked-1) = %+v, %v; want the acknowledged order taken", info, err)
	}
	r.agree(t, r.c, "a")
	wantStock(t, "front", r.o, "a", 7)
}
