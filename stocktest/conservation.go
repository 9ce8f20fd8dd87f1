package stocktest

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"

	"github.com/stockguard/stockguard"
)

// tally is one goroutine's account of what it was told.
type tally struct {
	acked      map[string]int64 // units acknowledged, per SKU
	unknown    map[string]int64 // units whose outcome is unknown, per SKU
	contention int64
	stray      []error // errors outside the contract
}

// conservation stocks skus SKUs with stock units each, then lets
// s.Goroutines goroutines, spread over two instances as over two processes,
// take 1–3 units at a time until every SKU is sold out. It checks that
// units acknowledged equal units gone (allowing for outcomes reported
// unknown), that no level goes below zero, and that everything sells.
func (s Suite) conservation(ctx context.Context, subj Subject, r *recorder, skus int, stock int64) {
	ctx, cancel := context.WithTimeout(ctx, s.Timeout)
	defer cancel()

	instances := []stockguard.Inventory{subj.New(), subj.New()}
	names := make([]string, skus)
	for i := range names {
		names[i] = subj.SKU(fmt.Sprintf("conserve-%d", i))
		if !r.set(ctx, instances[0], names[i], stock) {
			return
		}
	}

	tallies := make([]tally, s.Goroutines)
	var wg sync.WaitGroup
	for g := range s.Goroutines {
		wg.Go(func() {
			tallies[g] = drain(ctx, instances[g%2], names, uint64(g))
		})
	}
	wg.Wait()
	if ctx.Err() != nil {
		r.add("did not sell out within %v", s.Timeout)
		return
	}

	var contention int64
	for _, t := range tallies {
		contention += t.contention
		for _, err := range t.stray {
			r.add("Decrement returned an unexpected error: %v", err)
		}
	}
	for _, sku := range names {
		var acked, unknown int64
		for _, t := range tallies {
			acked += t.acked[sku]
			unknown += t.unknown[sku]
		}
		final, err := instances[1].Stock(context.WithoutCancel(ctx), sku)
		if !r.expect(fmt.Sprintf("Stock(%q) after the run", sku), err, nil) {
			continue
		}
		gone := stock - final
		switch {
		case final < 0:
			r.add("%q went below zero: %d", sku, final)
		case acked > gone:
			r.add("oversold %q: %d units acknowledged, only %d gone (initial %d, final %d)", sku, acked, gone, stock, final)
		case gone > acked+unknown:
			r.add("lost units of %q: %d gone, %d acknowledged, %d of unknown outcome", sku, gone, acked, unknown)
		}
		if final != 0 && final >= 0 {
			r.add("%q not sold out: %d left after every buyer was refused", sku, final)
		}
	}
}

// drain buys from skus until each has refused a single unit.
func drain(ctx context.Context, inv stockguard.Inventory, skus []string, seed uint64) tally {
	t := tally{acked: map[string]int64{}, unknown: map[string]int64{}}
	rng := rand.New(rand.NewPCG(seed, 0x5eed))
	open := append([]string(nil), skus...)
	single := map[string]bool{} // SKUs that refused a multi-unit take: try 1 next
	for len(open) > 0 && ctx.Err() == nil {
		i := rng.IntN(len(open))
		sku := open[i]
		qty := int64(1 + rng.IntN(3))
		if single[sku] {
			qty = 1
		}
		err := inv.Decrement(ctx, sku, qty)
		switch {
		case err == nil:
			t.acked[sku] += qty
		case errors.Is(err, stockguard.ErrInsufficientStock):
			if qty > 1 {
				single[sku] = true
				continue
			}
			open[i] = open[len(open)-1]
			open = open[:len(open)-1]
		case errors.Is(err, stockguard.ErrContention), errors.Is(err, stockguard.ErrUnavailable):
			// Nothing changed: busy, or the server could not serve for a
			// moment (a crowded server's "too many connections").
			t.contention++
		case errors.Is(err, stockguard.ErrOutcomeUnknown):
			t.unknown[sku] += qty
		case ctx.Err() != nil:
			return t
		default:
			t.stray = append(t.stray, err)
			if len(t.stray) > 10 {
				return t
			}
		}
	}
	return t
}
