package redislock

import (
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stockguard/stockguard"
	"github.com/stockguard/stockguard/internal/backends/backendstest"
	"github.com/stockguard/stockguard/internal/must"
	"github.com/stockguard/stockguard/internal/redistest"
	"github.com/stockguard/stockguard/mysqllock"
)

// scanKeys lists the keys under prefix on every client, by SCAN.
func scanKeys(t *testing.T, clients []redis.UniversalClient, prefix string) []string {
	t.Helper()
	var all []string
	for i, c := range clients {
		var keys []string
		for _, k := range redistest.Keys(t.Context(), t, c, prefix) {
			keys = append(keys, fmt.Sprintf("%d:%s", i, k))
		}
		all = append(all, keys...)
	}
	slices.Sort(all)
	return all
}

// TestUnknownSKU_createsNothing decrements SKUs that were never stocked
// with every strategy of this package: each is ErrUnknownSKU, and the keys
// under the strategy's prefix — a stocked SKU's included — stay the same,
// on every master. (NewGuarded used to leave a fencing counter behind for
// each unknown SKU, without expiry.)
func TestUnknownSKU_createsNothing(t *testing.T) {
	rdb := backendstest.RedisClient(t)
	single := []redis.UniversalClient{rdb}
	type strategy struct {
		name    string
		clients []redis.UniversalClient
		inv     func(prefix string) stockguard.Inventory
	}
	strategies := []strategy{
		{"Atomic", single, func(p string) stockguard.Inventory { return must.New(NewAtomic(rdb, WithPrefix(p))) }},
		{"Guarded", single, func(p string) stockguard.Inventory { return must.New(NewGuarded(rdb, WithPrefix(p))) }},
		{"Segmented", single, func(p string) stockguard.Inventory { return must.New(NewSegmented(rdb, WithPrefix(p))) }},
		{"Segmented/WithSegmentLocks", single, func(p string) stockguard.Inventory {
			return must.New(NewSegmented(rdb, WithPrefix(p), WithSegmentLocks()))
		}},
	}
	if !testing.Short() {
		_, masters := masters(t, 3)
		strategies = append(strategies, strategy{"RedlockGuarded", masters, func(p string) stockguard.Inventory {
			return must.New(NewRedlockGuarded(masters, WithPrefix(p), WithNodeTimeout(testNodeTimeout)))
		}})
		db := backendstest.DB(t)
		table := fencedTable(t, db)
		strategies = append(strategies, strategy{"Guarded/mysqlFencedStore", single, func(p string) stockguard.Inventory {
			return must.New(NewGuarded(rdb, WithPrefix(p), WithStore(must.New(mysqllock.NewFencedStore(db, mysqllock.WithTable(table))))))
		}})
	}
	for _, s := range strategies {
		t.Run(s.name, func(t *testing.T) {
			ctx := t.Context()
			prefix := redistest.Prefix(t, rdb)
			for _, c := range s.clients[1:] {
				redistest.Prefix(t, c) // cleanup on the other masters
			}
			inv := s.inv(prefix)
			// A stocked SKU, decremented once, so its own keys (a fencing
			// counter, a gather counter) exist before the count.
			sku := "stocked"
			if err := inv.SetStock(ctx, sku, 10); err != nil {
				t.Fatal(err)
			}
			if err := inv.Decrement(ctx, sku, 11); !errors.Is(err, stockguard.ErrInsufficientStock) {
				t.Fatalf("Decrement of 11 of 10: %v, want ErrInsufficientStock", err)
			}
			if err := inv.Decrement(ctx, sku, 1); err != nil {
				t.Fatal(err)
			}
			before := scanKeys(t, s.clients, prefix)
			if len(before) == 0 {
				t.Fatal("no keys under the prefix after SetStock: the count below would prove nothing")
			}
			for i := range 20 {
				unknown := fmt.Sprintf("never-stocked-%d", i)
				if err := inv.Decrement(ctx, unknown, int64(1+i)); !errors.Is(err, stockguard.ErrUnknownSKU) {
					t.Fatalf("Decrement(%q): %v, want ErrUnknownSKU", unknown, err)
				}
			}
			// Background releases (Redlock's) land once the masters answer;
			// the deadline is a hang guard only.
			deadline := time.Now().Add(time.Minute)
			after := scanKeys(t, s.clients, prefix)
			for !slices.Equal(after, before) && time.Now().Before(deadline) {
				time.Sleep(10 * time.Millisecond)
				after = scanKeys(t, s.clients, prefix)
			}
			if !slices.Equal(after, before) {
				t.Errorf("keys under the prefix changed after Decrements of unknown SKUs:\n before %q\n after  %q", before, after)
			}
			if n, err := inv.Stock(ctx, sku); n != 9 || err != nil {
				t.Errorf("Stock of the stocked SKU = %d, %v; want 9", n, err)
			}
		})
	}
}
