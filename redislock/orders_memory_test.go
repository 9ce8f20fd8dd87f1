package redislock

import (
	"context"
	"crypto/rand"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stockguard/stockguard"
	"github.com/stockguard/stockguard/internal/backends/backendstest"
	"github.com/stockguard/stockguard/internal/redistest"
)

// TestAtomic_Orders_memory measures what an order keeps in Redis (MEMORY
// USAGE of every key but the stock levels, per order, over 100 orders of
// 8-byte SKUs and IDs under a 7-byte prefix) and checks it against the
// figures in Take's doc, with some room.
func TestAtomic_Orders_memory(t *testing.T) {
	rdb := backendstest.RedisClient(t)
	const orders = 100
	for _, tt := range []struct {
		mode   string
		hold   bool
		lines  int
		atMost int64 // bytes per order
	}{
		{"oneScript", false, 1, 140},
		{"oneScript", false, 5, 190},
		{"oneScript", true, 1, 185},
		{"oneScript", true, 5, 350},
		{"twoPhase", false, 1, 340},
		{"twoPhase", false, 5, 1000},
		{"twoPhase", true, 1, 370},
		{"twoPhase", true, 5, 1150},
	} {
		t.Run(fmt.Sprintf("%s/hold=%v/lines=%d", tt.mode, tt.hold, tt.lines), func(t *testing.T) {
			// A short prefix, so that the figures are the orders', not the
			// test's names.
			prefix := "m" + rand.Text()[:5] + ":"
			t.Cleanup(func() {
				for _, k := range redistest.Keys(context.Background(), t, rdb, prefix) {
					rdb.Del(context.Background(), k)
				}
			})
			a := newOrders(rdb, prefix, tt.mode == "twoPhase")
			ctx := t.Context()
			var cart []stockguard.Line
			for i := range tt.lines {
				sku := fmt.Sprintf("sku%05d", i)
				stockAll(t, a, stockguard.MaxQty, sku)
				cart = append(cart, line(sku, 1))
			}
			for i := range orders {
				id := fmt.Sprintf("ord%05d", i)
				var err error
				if tt.hold {
					err = a.Hold(ctx, id, time.Hour, cart...)
				} else {
					err = a.Take(ctx, id, cart...)
				}
				if err != nil {
					t.Fatal(err)
				}
			}
			var total int64
			for _, k := range redistest.Keys(ctx, t, rdb, prefix) {
				if strings.HasPrefix(k, prefix+"stock:") {
					continue
				}
				n, err := rdb.MemoryUsage(ctx, k, 0).Result()
				if err != nil {
					t.Fatal(err)
				}
				total += n
			}
			per := total / orders
			t.Logf("%d bytes per order", per)
			if per > tt.atMost {
				t.Errorf("%d bytes per order, the doc says at most %d", per, tt.atMost)
			}
		})
	}
}
