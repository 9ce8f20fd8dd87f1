// Package room is the one rule that keeps a Return from ever being refused:
// the units out on open orders (held or taken) may all come back, so they
// count against stockguard.MaxQty with the level. Every Orders
// implementation in Go checks Restock and SetStock with it; the Redis Lua
// scripts keep the same rule.
package room

import (
	"fmt"

	"github.com/stockguard/stockguard"
)

// Restock returns nil when qty more units fit beside sku's level have and
// its out units on open orders, else an error wrapping
// stockguard.ErrInvalidRequest.
func Restock(sku string, have, out, qty int64) error {
	if have+out > stockguard.MaxQty-qty {
		return fmt.Errorf("%w: %q has %d units and %d out on open orders: %d more would pass %d units",
			stockguard.ErrInvalidRequest, sku, have, out, qty, int64(stockguard.MaxQty))
	}
	return nil
}

// Set returns nil when a level of qty leaves room for sku's out units on
// open orders to come back, else an error wrapping
// stockguard.ErrInvalidRequest.
func Set(sku string, qty, out int64) error {
	if out > stockguard.MaxQty-qty {
		return fmt.Errorf("%w: a level of %d for %q leaves no room for the %d units out on open orders within %d",
			stockguard.ErrInvalidRequest, qty, sku, out, int64(stockguard.MaxQty))
	}
	return nil
}
