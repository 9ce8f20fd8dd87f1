package combinetest

import (
	"context"
	"errors"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stockguard/stockguard"
)

// Go starts inv.Decrement and returns where its error will be.
func Go(ctx context.Context, inv stockguard.Decrementer, sku string, qty int64) <-chan error {
	done := make(chan error, 1)
	go func() { done <- inv.Decrement(ctx, sku, qty) }()
	return done
}

// DrainMixed lets 64 goroutines, spread over insts, take 1–5 units of sku
// (stocked with stock) until each is refused a single unit. It checks that
// the units acknowledged are exactly the units gone and that no refusal was
// false: stock only goes down, so every refused request must want more
// than what is left at the end. It returns the units acknowledged.
func DrainMixed(t testing.TB, insts []stockguard.Inventory, sku string, stock int64) int64 {
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
					lower(&minRefused, qty)
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
	return acked.Load()
}

// lower sets a to v if v is smaller.
func lower(a *atomic.Int64, v int64) {
	for m := a.Load(); v < m; m = a.Load() {
		if a.CompareAndSwap(m, v) {
			return
		}
	}
}

// Combined fails t unless the batches, with requests in all, carried two
// requests each on average: concurrent requests were combined.
func Combined(t testing.TB, batches, requests int64) {
	t.Helper()
	t.Logf("%d requests in %d batches", requests, batches)
	if requests < 2*batches {
		t.Errorf("%d requests in %d batches: mean batch below 2", requests, batches)
	}
}
