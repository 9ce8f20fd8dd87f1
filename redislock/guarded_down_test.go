package redislock

import (
	"errors"
	"testing"
	"time"

	"github.com/stockguard/stockguard"
	"github.com/stockguard/stockguard/internal/must"
	"github.com/stockguard/stockguard/internal/rediskeys"
	"github.com/stockguard/stockguard/strategy"
)

// TestRedlockGuarded_stockMasterDownIsUnavailable kills the stock's master
// while a stranger holds the lock on the other two: no quorum can be had,
// but the SKU is not busy — its stock cannot be served — so Decrement must
// say ErrUnavailable, not ErrContention (found by the fault suite,
// bench/faults, under restart).
func TestRedlockGuarded_stockMasterDownIsUnavailable(t *testing.T) {
	servers, clients := masters(t, 3)
	prefix := lockPrefix(t)
	ctx := t.Context()
	g := must.New(NewRedlockGuarded(clients, WithPrefix(prefix), WithNodeTimeout(testNodeTimeout),
		WithRetry(strategy.RetryPolicy{MaxAttempts: 3})))
	if err := g.SetStock(ctx, "sku", 10); err != nil {
		t.Fatal(err)
	}
	lockKey := rediskeys.Keys{Prefix: prefix}.Lock("sku")
	for _, c := range clients[1:] {
		if err := c.Set(ctx, lockKey, "stranger", 10*time.Second).Err(); err != nil {
			t.Fatal(err)
		}
	}
	if err := g.Decrement(ctx, "sku", 1); !errors.Is(err, stockguard.ErrContention) {
		t.Fatalf("Decrement with the lock held elsewhere = %v, want ErrContention", err)
	}
	if err := servers[0].Proc.Kill(); err != nil {
		t.Fatal(err)
	}
	err := g.Decrement(ctx, "sku", 1)
	if !errors.Is(err, stockguard.ErrUnavailable) || strategy.Contract(err) != stockguard.ErrUnavailable {
		t.Fatalf("Decrement with the stock's master down = %v, want ErrUnavailable only", err)
	}
}
