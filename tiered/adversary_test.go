package tiered

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stockguard/stockguard"
	"github.com/stockguard/stockguard/internal/backends/backendstest"
	"github.com/stockguard/stockguard/internal/must"
	"github.com/stockguard/stockguard/internal/netgate"
	"github.com/stockguard/stockguard/internal/redistest"
	"github.com/stockguard/stockguard/mysqllock"
	"github.com/stockguard/stockguard/stocktest"
)

// The adversarial checker over a tiered Orders with its Consumer applying
// to the MySQL back meanwhile: three front instances, callers that give
// up and repeat on another one. At every quiet point the stream is
// drained and the tiers must agree on every SKU.
func TestOrders_adversary(t *testing.T) {
	r := newRig(t)
	run(t, r.consumer(nil))
	insts := []stockguard.Orders{
		must.New(New(r.rdb, r.back, WithPrefix(r.prefix))),
		must.New(New(r.rdb, r.back, WithPrefix(r.prefix))),
		must.New(New(r.rdb, r.back, WithPrefix(r.prefix))),
	}
	stocktest.Adversary{Quiet: r.quiet}.RunOrders(t, insts)
}

// The adversarial checker with the front's Redis connections and the
// back's MySQL connections, the Consumer's included, behind a network
// that holds a share of the requests past their callers' deadlines and
// delivers them later, after the repeats.
func TestOrders_adversaryLateNetwork(t *testing.T) {
	r := newRig(t)
	l := netgate.Adversarial(t)
	rdb := redistest.LateClient(t, backendstest.SharedRedis(t).Addr, l)
	db := backendstest.DB(t, multi, backendstest.LateMySQL(t, l))
	back := must.New(mysqllock.NewBatched(db, mysqllock.WithTable(r.table)))
	run(t, must.New(NewConsumer(rdb, back, WithPrefix(r.prefix))))
	insts := []stockguard.Orders{
		must.New(New(rdb, back, WithPrefix(r.prefix))),
		must.New(New(rdb, back, WithPrefix(r.prefix))),
		must.New(New(rdb, back, WithPrefix(r.prefix))),
	}
	stocktest.Adversary{Seed: l.Seed(), Late: l.Max(), Quiet: r.quiet}.RunOrders(t, insts)
	l.Check(t)
}

// quiet drains the stream and fails unless the tiers then agree on every
// SKU of skus.
func (r *rig) quiet(ctx context.Context, skus []string) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := Drain(ctx, r.q); err != nil {
		return fmt.Errorf("drain the stream: %w%s", err, r.stuck(context.WithoutCancel(ctx)))
	}
	rep, err := NewReconciler(r.o, r.q).Check(ctx, skus...)
	if err != nil {
		return fmt.Errorf("reconciler: %w", err)
	}
	if len(rep.Drifts) > 0 {
		return fmt.Errorf("the tiers disagree after draining: %+v", rep.Drifts)
	}
	return nil
}

// stuck describes the entries left in the stream: what the back has under
// each one's ID, and the levels of its SKUs on both tiers.
func (r *rig) stuck(ctx context.Context) string {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	left, err := r.q.Backlog(ctx)
	if err != nil {
		return fmt.Sprintf("; backlog: %v", err)
	}
	var b strings.Builder
	for _, e := range left {
		info, err := r.back.Order(ctx, e.Order)
		fmt.Fprintf(&b, "; entry %v: the back's order %+v, %v", e, info, err)
		for _, l := range e.Lines {
			var level, held int64
			ferr := r.o.call(ctx, "", func(ctx context.Context) (err error) { level, held, err = r.o.front.Held(ctx, l.SKU); return err })
			n, berr := r.back.Stock(ctx, l.SKU)
			fmt.Fprintf(&b, "; %s: front %d held %d (%v), back %d (%v)", l.SKU, level, held, ferr, n, berr)
		}
	}
	return b.String()
}
