package redislock

import (
	"testing"

	"github.com/redis/go-redis/v9"
	"github.com/stockguard/stockguard"
	"github.com/stockguard/stockguard/internal/backends/backendstest"
	"github.com/stockguard/stockguard/internal/must"
	"github.com/stockguard/stockguard/internal/redistest"
	"github.com/stockguard/stockguard/stocktest"
)

// stringChecks builds one StringCheck per way Atomic runs an order, each
// in a prefix of its own, over the strategies that write stock keys
// (Atomic, Batched, Guarded, Segmented) and over the same on a closed
// client: a string they refuse with ErrInvalidRequest was refused before
// any I/O.
func stringChecks(f *testing.F) []*stocktest.StringCheck {
	rdb := backendstest.RedisClient(f)
	closed := redis.NewClient(rdb.Options())
	closed.Close()
	var checks []*stocktest.StringCheck
	for _, m := range orderModes {
		prefix := redistest.Prefix(f, rdb) + m.name + ":"
		o := newOrders(rdb, prefix, m.twoPhase)
		c := &stocktest.StringCheck{
			Inventories: []stockguard.Inventory{o, must.New(NewBatched(rdb, WithPrefix(prefix))), must.New(NewGuarded(rdb, WithPrefix(prefix))), must.New(NewSegmented(rdb, WithPrefix(prefix)))},
			Orders:      []stockguard.Orders{o},
			Offline: []stockguard.Inventory{newOrders(closed, prefix, m.twoPhase), must.New(NewBatched(closed, WithPrefix(prefix))),
				must.New(NewGuarded(closed, WithPrefix(prefix))), must.New(NewSegmented(closed, WithPrefix(prefix)))},
		}
		if err := c.Prepare(f.Context()); err != nil {
			f.Fatal(err)
		}
		checks = append(checks, c)
	}
	return checks
}

// FuzzSKU sends a SKU string through every key and script that carries
// one.
func FuzzSKU(f *testing.F) {
	checks := stringChecks(f)
	f.Fuzz(func(t *testing.T, sku string) {
		for _, c := range checks {
			for _, v := range c.SKU(t.Context(), sku) {
				t.Error(v)
			}
		}
	})
}

// FuzzOrderID sends an order ID string through every order script, in
// both ways Atomic runs an order.
func FuzzOrderID(f *testing.F) {
	checks := stringChecks(f)
	f.Fuzz(func(t *testing.T, id string) {
		for _, c := range checks {
			for _, v := range c.OrderID(t.Context(), id) {
				t.Error(v)
			}
		}
	})
}
