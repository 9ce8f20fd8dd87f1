package tiered

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stockguard/stockguard"
	"github.com/stockguard/stockguard/internal/backends/backendstest"
	"github.com/stockguard/stockguard/internal/must"
	"github.com/stockguard/stockguard/internal/netgate"
	"github.com/stockguard/stockguard/mysqllock"
	"github.com/stockguard/stockguard/stocktest"
	"github.com/stockguard/stockguard/strategy"
)

// placed is one order a worker of TestRecover_adversary placed: when its
// Take was sent and what it answered, and the same for its Return.
type placed struct {
	id             string
	lines          []stockguard.Line
	sent           time.Time
	taken          error
	returnSent     time.Time
	returned       error
	returnAnswered bool
}

// A front without persistence restarted while sales go on, and recovered
// while they go on: workers take and return carts on the front all along
// (refused with ErrFrontLost between the loss and Recover's end), two
// Consumers apply the stream, one of them through a network that delivers
// a share of its writes to the back past its lease. After the run, with
// the stream drained and every late write delivered:
//
//   - the tiers agree on every SKU (the reconciler sees no drift);
//   - the back's ledger accounts for its levels: initial − the units of its
//     orders taken = its level;
//   - every order acknowledged after Recover returned is on the back, taken
//     (or returned, when its Return was acknowledged);
//   - the orders acknowledged before the loss and not on the back are the
//     front's documented loss (no persistence): counted and logged.
//
// A few seconds by default; stocktest.EnvAdversary=long (or a duration)
// runs it longer, before and after the loss alike.
func TestRecover_adversary(t *testing.T) {
	phase := time.Second
	if v := os.Getenv(stocktest.EnvAdversary); v == "long" {
		phase = stocktest.DefaultAdversaryLong / 2
	} else if d, err := time.ParseDuration(v); err == nil && d > 0 {
		phase = d / 2
	}
	ctx := t.Context()
	r := newLostRig(t)
	skus := []string{"a", "b", "c", "d", "e", "f"}
	const initial = 1_000_000
	stock(t, r.o, initial, skus...)

	// A second consumer whose writes to the back may arrive past its lease.
	// Each claims the other's entries idle past a second: the late one's
	// batches often outlive its lease and wait for a claim.
	l := netgate.NewLate(t, 0, 0.1, 2*lostLease)
	lateDB := backendstest.DB(t, multi, backendstest.LateMySQL(t, l))
	lateBack := must.New(mysqllock.NewBatched(lateDB, mysqllock.WithTable(r.table)))
	var consumers []*Consumer
	for _, back := range []stockguard.Orders{lateBack, r.back} {
		c := must.New(NewConsumer(r.srv.Client(), back, WithPrefix("shop:"), WithApplyLease(lostLease), WithClaimIdle(time.Second)))
		run(t, c)
		consumers = append(consumers, c)
	}

	stop := make(chan struct{})
	var (
		mu     sync.Mutex
		orders []*placed
		wg     sync.WaitGroup
	)
	seed := l.Seed()
	for w := range 6 {
		wg.Go(func() {
			rnd := rand.New(rand.NewPCG(seed, uint64(w)))
			var mine []*placed
			for n := 0; ; n++ {
				select {
				case <-stop:
					return
				default:
				}
				if len(mine) > 0 && rnd.IntN(4) == 0 {
					p := mine[rnd.IntN(len(mine))]
					if p.taken == nil && !p.returnAnswered {
						call, cancel := context.WithTimeout(ctx, 2*time.Second)
						p.returnSent = time.Now()
						p.returned = r.o.Return(call, p.id)
						p.returnAnswered = true
						cancel()
						continue
					}
				}
				p := &placed{id: fmt.Sprintf("w%d-%d", w, n)}
				for _, i := range rnd.Perm(len(skus))[:1+rnd.IntN(3)] {
					p.lines = append(p.lines, line(skus[i], 1+int64(rnd.IntN(3))))
				}
				call, cancel := context.WithTimeout(ctx, 2*time.Second)
				p.sent = time.Now()
				p.taken = r.o.Take(call, p.id, p.lines...)
				cancel()
				mine = append(mine, p)
				mu.Lock()
				orders = append(orders, p)
				mu.Unlock()
				// Paced: the back applies what the front sells, so that
				// the run's backlog stays small.
				time.Sleep(2 * time.Millisecond)
			}
		})
	}

	time.Sleep(phase)
	r.restart(t)
	// Recover, given every ID the back's ledger has, again until it agrees.
	ledger := backendstest.DB(t)
	var recovered time.Time
	for attempt := 1; ; attempt++ {
		var ids []string
		if err := ledger.SelectContext(ctx, &ids, "SELECT id FROM `"+mysqllock.OrdersTable(r.table)+"`"); err != nil {
			t.Fatal(err)
		}
		err := r.o.Recover(ctx, skus, ids)
		if err == nil {
			recovered = time.Now()
			break
		}
		t.Logf("Recover, attempt %d: %v", attempt, err)
		if attempt == 5 {
			t.Fatal("Recover never agreed")
		}
	}
	time.Sleep(phase)
	close(stop)
	wg.Wait()

	// Quiet: every late write delivered, the stream drained.
	l.Wait()
	drained, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	if err := Drain(drained, r.q); err != nil {
		t.Fatal(err)
	}
	rep, err := NewReconciler(r.o, r.q).Check(ctx, skus...)
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range rep.Drifts {
		t.Errorf("the tiers disagree: %+v", d)
	}

	taken := map[string]int64{}
	var acked, lost, after int
	for _, p := range orders {
		info, err := r.back.Order(ctx, p.id)
		switch {
		case errors.Is(err, stockguard.ErrUnknownOrder):
		case err != nil:
			t.Fatalf("back: Order(%q) = %v", p.id, err)
		case !slices.Equal(info.Lines, strategy.SortedLines(p.lines)):
			t.Errorf("back: order %q has %v, placed with %v", p.id, info.Lines, p.lines)
		case info.State == stockguard.OrderTaken:
			for _, ln := range info.Lines {
				taken[ln.SKU] += ln.Qty
			}
		case info.State != stockguard.OrderReturned:
			t.Errorf("back: order %q is %v", p.id, info.State)
		}
		if p.taken != nil {
			continue
		}
		acked++
		onBack := err == nil
		switch {
		case p.sent.After(recovered):
			after++
			if !onBack {
				t.Errorf("order %q acknowledged after Recover is not on the back", p.id)
			}
		case !onBack:
			lost++ // acknowledged by the front that was lost, never applied
		}
		if onBack && p.returnAnswered && p.returned == nil && p.returnSent.After(recovered) && info.State != stockguard.OrderReturned {
			t.Errorf("order %q: Return acknowledged after Recover, the back has it %v", p.id, info.State)
		}
	}
	for _, sku := range skus {
		wantStock(t, "back (initial − its orders taken)", r.back, sku, initial-taken[sku])
	}
	t.Logf("%d orders, %d acknowledged (%d after Recover), %d acknowledged by the lost front and never applied (no persistence: lost with it); late network: %d writes held, %d delivered after their caller left",
		len(orders), acked, after, lost, l.Held(), l.DeliveredLate())
	for i, c := range consumers {
		s := c.Stats()
		t.Logf("consumer %d (late network: %v): applied %d, claimed %d, front lost %d times, dropped %d", i, i == 0, s.Applied, s.Claimed, s.FrontLost, s.Dropped)
	}
	if after == 0 {
		t.Error("no order acknowledged after Recover: the run tested nothing of it")
	}
}
