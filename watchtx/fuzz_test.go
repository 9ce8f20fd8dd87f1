package watchtx

import (
	"testing"

	"github.com/redis/go-redis/v9"
	"github.com/stockguard/stockguard"
	"github.com/stockguard/stockguard/internal/backends/backendstest"
	"github.com/stockguard/stockguard/internal/must"
	"github.com/stockguard/stockguard/internal/redistest"
	"github.com/stockguard/stockguard/stocktest"
)

// FuzzSKU sends a SKU string through WATCH, GET and the transaction that
// writes it, and through an Inventory on a closed client: a string it
// refuses with ErrInvalidRequest was refused before any I/O.
func FuzzSKU(f *testing.F) {
	rdb := backendstest.RedisClient(f)
	closed := redis.NewClient(rdb.Options())
	closed.Close()
	prefix := redistest.Prefix(f, rdb)
	c := &stocktest.StringCheck{
		Inventories: []stockguard.Inventory{must.New(New(rdb, WithPrefix(prefix))), must.New(New(rdb, WithPrefix(prefix)))},
		Offline:     []stockguard.Inventory{must.New(New(closed, WithPrefix(prefix)))},
	}
	if err := c.Prepare(f.Context()); err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, sku string) {
		for _, v := range c.SKU(t.Context(), sku) {
			t.Error(v)
		}
	})
}
