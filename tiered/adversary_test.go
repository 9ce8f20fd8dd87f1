package tiered

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stockguard/stockguard"
	"github.com/stockguard/stockguard/internal/must"
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
	stocktest.Adversary{Quiet: func(ctx context.Context, skus []string) error {
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
	}}.RunOrders(t, insts)
}
