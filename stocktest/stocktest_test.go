package stocktest_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stockguard/stockguard"
	"github.com/stockguard/stockguard/internal/memstock"
	"github.com/stockguard/stockguard/stocktest"
	"github.com/stockguard/stockguard/strategy"
)

func TestRun_memstock(t *testing.T) {
	store := memstock.New()
	stocktest.Run(t, func(*testing.T) stockguard.Inventory { return store })
}

func TestCheck_memstockHasNoViolations(t *testing.T) {
	store := memstock.New()
	if vs := (stocktest.Suite{}).Check(t.Context(), func() stockguard.Inventory { return store }); len(vs) > 0 {
		t.Fatalf("reference inventory has violations: %v", vs)
	}
}

// racy is the seeds' read-then-write decrement: correct alone, broken under
// contention. Loads and stores are atomic, so the race detector stays quiet
// and only the checker can catch the lost updates.
type racy struct {
	mu    sync.Mutex
	stock map[string]*atomic.Int64
}

func (r *racy) cell(sku string) *atomic.Int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.stock[sku]
}

func (r *racy) Decrement(ctx context.Context, sku string, qty int64) error {
	if err := strategy.Validate(sku, qty); err != nil {
		return err
	}
	if err := strategy.Canceled(ctx); err != nil {
		return err
	}
	c := r.cell(sku)
	if c == nil {
		return stockguard.ErrUnknownSKU
	}
	have := c.Load()
	if have < qty {
		return stockguard.ErrInsufficientStock
	}
	runtime.Gosched() // the network round trip between GET and SET
	c.Store(have - qty)
	return nil
}

func (r *racy) SetStock(ctx context.Context, sku string, qty int64) error {
	if err := strategy.ValidateSet(sku, qty); err != nil {
		return err
	}
	if err := strategy.Canceled(ctx); err != nil {
		return err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	c := new(atomic.Int64)
	c.Store(qty)
	r.stock[sku] = c
	return nil
}

func (r *racy) Stock(ctx context.Context, sku string) (int64, error) {
	if err := strategy.ValidateSKU(sku); err != nil {
		return 0, err
	}
	c := r.cell(sku)
	if c == nil {
		return 0, stockguard.ErrUnknownSKU
	}
	return c.Load(), nil
}

// cacheAside serves Stock from a cache that writes invalidate, filling it
// after reading the store: a read that races a Decrement can put the level
// from before the Decrement back into the cache, where it stays until the
// next write. Sequential reads and final tallies are all correct.
type cacheAside struct {
	*memstock.Store
	mu    sync.Mutex
	cache map[string]int64
}

func (c *cacheAside) invalidate(sku string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.cache, sku)
}

func (c *cacheAside) Decrement(ctx context.Context, sku string, qty int64) error {
	defer c.invalidate(sku)
	return c.Store.Decrement(ctx, sku, qty)
}

func (c *cacheAside) SetStock(ctx context.Context, sku string, qty int64) error {
	defer c.invalidate(sku)
	return c.Store.SetStock(ctx, sku, qty)
}

func (c *cacheAside) Stock(ctx context.Context, sku string) (int64, error) {
	c.mu.Lock()
	level, ok := c.cache[sku]
	c.mu.Unlock()
	if ok {
		return level, nil
	}
	level, err := c.Store.Stock(ctx, sku)
	if err != nil {
		return 0, err
	}
	// The round trip to the cache server, long enough that the other
	// goroutines' decrements land inside it even when two busy loops share
	// the cores: the stale fill is then all but certain.
	time.Sleep(5 * time.Millisecond)
	c.mu.Lock()
	defer c.mu.Unlock()
	c.cache[sku] = level
	return level, nil
}

// broken wraps the reference inventory with one contract breach.
type broken struct {
	*memstock.Store
	decrement func(s *memstock.Store, ctx context.Context, sku string, qty int64) error
}

func (b broken) Decrement(ctx context.Context, sku string, qty int64) error {
	return b.decrement(b.Store, ctx, sku, qty)
}

func TestCheck_reportsBrokenInventories(t *testing.T) {
	tests := []struct {
		name     string
		inv      func() stockguard.Inventory
		wantCase string
		wantText string
		only     bool // no other case notices the breach
	}{
		{
			name:     "read-then-write oversells",
			inv:      func() stockguard.Inventory { return &racy{stock: map[string]*atomic.Int64{}} },
			wantCase: "Conservation/OneSKU",
			wantText: "oversold",
		},
		{
			name: "unknown SKU created at -qty",
			inv: func() stockguard.Inventory {
				return broken{memstock.New(), func(s *memstock.Store, ctx context.Context, sku string, qty int64) error {
					if _, err := s.Stock(ctx, sku); errors.Is(err, stockguard.ErrUnknownSKU) {
						s.SetStock(ctx, sku, 0)
						return err
					}
					return s.Decrement(ctx, sku, qty)
				}}
			},
			wantCase: "UnknownSKU",
			wantText: "Stock of a never-stocked SKU",
		},
		{
			name: "no validation before I/O",
			inv: func() stockguard.Inventory {
				return broken{memstock.New(), func(s *memstock.Store, ctx context.Context, sku string, qty int64) error {
					if err := ctx.Err(); err != nil {
						return err
					}
					return s.Decrement(ctx, sku, qty)
				}}
			},
			wantCase: "InvalidInput",
			wantText: "want stockguard: invalid request",
		},
		{
			name: "nil context panics",
			inv: func() stockguard.Inventory {
				return broken{memstock.New(), func(s *memstock.Store, ctx context.Context, sku string, qty int64) error {
					if err := strategy.Validate(sku, qty); err != nil {
						return err
					}
					if err := ctx.Err(); err != nil { // panics on a nil ctx
						return err
					}
					return s.Decrement(ctx, sku, qty)
				}}
			},
			wantCase: "NilContext",
			wantText: "panicked",
			only:     true,
		},
		{
			name: "stray driver error",
			inv: func() stockguard.Inventory {
				return broken{memstock.New(), func(s *memstock.Store, ctx context.Context, sku string, qty int64) error {
					if qty == 3 {
						return fmt.Errorf("driver: bad connection")
					}
					return s.Decrement(ctx, sku, qty)
				}}
			},
			wantCase: "Conservation/OneSKU",
			wantText: "unexpected error",
		},
		{
			name: "applies despite a canceled context",
			inv: func() stockguard.Inventory {
				return broken{memstock.New(), func(s *memstock.Store, _ context.Context, sku string, qty int64) error {
					return s.Decrement(context.Background(), sku, qty)
				}}
			},
			wantCase: "CanceledContext",
			wantText: "Decrement",
		},
		{
			name: "false sold-out",
			inv: func() stockguard.Inventory {
				return broken{memstock.New(), func(s *memstock.Store, ctx context.Context, sku string, qty int64) error {
					if have, _ := s.Stock(ctx, sku); have <= 2 && have > 0 {
						return stockguard.ErrInsufficientStock
					}
					return s.Decrement(ctx, sku, qty)
				}}
			},
			wantCase: "Conservation/",
			wantText: "not sold out",
		},
		{
			name: "insufficient stock in words of its own",
			inv: func() stockguard.Inventory {
				return broken{memstock.New(), func(s *memstock.Store, ctx context.Context, sku string, qty int64) error {
					if have, err := s.Stock(ctx, sku); err == nil && have < qty {
						return fmt.Errorf("%w: %q has fewer than %d units", stockguard.ErrInsufficientStock, sku, qty)
					}
					return s.Decrement(ctx, sku, qty)
				}}
			},
			wantCase: "Insufficient",
			wantText: `has 5, 6 wanted`,
		},
		{
			name: "unknown SKU in words of its own",
			inv: func() stockguard.Inventory {
				return broken{memstock.New(), func(s *memstock.Store, ctx context.Context, sku string, qty int64) error {
					if _, err := s.Stock(ctx, sku); errors.Is(err, stockguard.ErrUnknownSKU) {
						return fmt.Errorf("%w: key %q does not exist", stockguard.ErrUnknownSKU, "stock:{"+sku+"}")
					}
					return s.Decrement(ctx, sku, qty)
				}}
			},
			wantCase: "UnknownSKU",
			wantText: "error text",
		},
		{
			name: "stale cached Stock",
			inv: func() stockguard.Inventory {
				return &cacheAside{Store: memstock.New(), cache: map[string]int64{}}
			},
			wantCase: "Linearizable/OneSKU",
			wantText: "not linearizable",
			only:     true,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			store := tt.inv()
			vs := (stocktest.Suite{}).Check(t.Context(), func() stockguard.Inventory { return store })
			for _, v := range vs {
				if tt.only && !strings.HasPrefix(v.Case, tt.wantCase) {
					t.Errorf("want only %s violations, got %v", tt.wantCase, v)
				}
			}
			for _, v := range vs {
				if strings.HasPrefix(v.Case, tt.wantCase) && strings.Contains(v.Detail, tt.wantText) {
					return
				}
			}
			t.Errorf("no %s violation containing %q; got %v", tt.wantCase, tt.wantText, vs)
		})
	}
}

// fenced is the reference inventory plus a fence key per SKU decremented,
// created before the SKU is looked up: what redislock.NewGuarded did for
// SKUs never stocked.
type fenced struct {
	*memstock.Store
	mu     sync.Mutex
	skus   map[string]bool
	fences map[string]bool
}

func (f *fenced) Decrement(ctx context.Context, sku string, qty int64) error {
	if err := strategy.Validate(sku, qty); err != nil {
		return err
	}
	f.mu.Lock()
	f.fences["fence:{"+sku+"}"] = true
	f.mu.Unlock()
	return f.Store.Decrement(ctx, sku, qty)
}

func (f *fenced) SetStock(ctx context.Context, sku string, qty int64) error {
	err := f.Store.SetStock(ctx, sku, qty)
	if err == nil {
		f.mu.Lock()
		f.skus[sku] = true
		f.mu.Unlock()
	}
	return err
}

// Footprint counts keys as a Redis strategy's test would under its prefix.
func (f *fenced) Footprint(context.Context) (int64, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return int64(len(f.skus) + len(f.fences)), nil
}

func TestCheck_footprintCatchesKeysForUnknownSKUs(t *testing.T) {
	inv := &fenced{Store: memstock.New(), skus: map[string]bool{}, fences: map[string]bool{}}
	vs := stocktest.Suite{Footprint: inv.Footprint}.Check(t.Context(), func() stockguard.Inventory { return inv })
	for _, v := range vs {
		if v.Case != "UnknownSKU" {
			t.Errorf("want only UnknownSKU violations, got %v", v)
		}
	}
	if len(vs) == 0 {
		t.Error("no UnknownSKU violation for fence keys created for never-stocked SKUs")
	}
}
