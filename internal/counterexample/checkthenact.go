package counterexample

import (
	"context"

	"github.com/redis/go-redis/v9"

	"github.com/stockguard/stockguard"
)

// CheckThenAct is the first thing everyone writes: GET the stock, check
// it, SET the new value — no lock, no transaction.
//
// How it breaks: two buyers GET the same level and both SET level−qty, so
// one decrement overwrites the other. Both were told yes; the stock moved
// once. The audit sees units acknowledged beyond the stock gone: oversold.
// It needs nothing but two concurrent buyers of one SKU.
type CheckThenAct struct{ redisStock }

var _ stockguard.Inventory = (*CheckThenAct)(nil)

// NewCheckThenAct keeps stock under "<prefix>stock:{sku}".
func NewCheckThenAct(rdb redis.UniversalClient, prefix string) *CheckThenAct {
	return &CheckThenAct{newRedisStock(rdb, prefix)}
}

// Decrement reads, checks and writes back sku's stock in three steps.
func (c *CheckThenAct) Decrement(ctx context.Context, sku string, qty int64) error {
	if err := admit(ctx, sku, qty); err != nil {
		return err
	}
	return c.takeUnlocked(ctx, sku, qty, Stall{})
}
