package tiered

import (
	"context"
	"fmt"
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
		return fmt.Errorf("drain the stream: %w", err)
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
