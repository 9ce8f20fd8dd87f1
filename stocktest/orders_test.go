package stocktest_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stockguard/stockguard"
	"github.com/stockguard/stockguard/internal/memorders"
	"github.com/stockguard/stockguard/stocktest"
	"github.com/stockguard/stockguard/strategy"
)

func TestRunOrders_memorders(t *testing.T) {
	store := memorders.New()
	stocktest.Suite{Footprint: store.Footprint}.RunOrders(t, func(*testing.T) stockguard.Orders { return store })
}

func TestRun_memorders(t *testing.T) {
	store := memorders.New()
	stocktest.Suite{Footprint: store.Footprint}.Run(t, func(*testing.T) stockguard.Inventory { return store })
}

func TestCheckOrders_memordersHasNoViolations(t *testing.T) {
	store := memorders.New()
	if vs := (stocktest.Suite{Footprint: store.Footprint}).CheckOrders(t.Context(), func() stockguard.Orders { return store }); len(vs) > 0 {
		t.Fatalf("reference orders have violations: %v", vs)
	}
}

// brokenOrders wraps the reference with one contract breach, in the
// methods it overrides.
type brokenOrders struct {
	*memorders.Store
	take    func(s *memorders.Store, ctx context.Context, id string, lines []stockguard.Line) error
	hold    func(s *memorders.Store, ctx context.Context, id string, ttl time.Duration, lines []stockguard.Line) error
	confirm func(s *memorders.Store, ctx context.Context, id string) error
	ret     func(s *memorders.Store, ctx context.Context, id string) error
	stock   func(s *memorders.Store, ctx context.Context, sku string) (int64, error)
}

func (b *brokenOrders) Take(ctx context.Context, id string, lines ...stockguard.Line) error {
	if b.take != nil {
		return b.take(b.Store, ctx, id, lines)
	}
	return b.Store.Take(ctx, id, lines...)
}

func (b *brokenOrders) Hold(ctx context.Context, id string, ttl time.Duration, lines ...stockguard.Line) error {
	if b.hold != nil {
		return b.hold(b.Store, ctx, id, ttl, lines)
	}
	return b.Store.Hold(ctx, id, ttl, lines...)
}

func (b *brokenOrders) Confirm(ctx context.Context, id string) error {
	if b.confirm != nil {
		return b.confirm(b.Store, ctx, id)
	}
	return b.Store.Confirm(ctx, id)
}

func (b *brokenOrders) Return(ctx context.Context, id string) error {
	if b.ret != nil {
		return b.ret(b.Store, ctx, id)
	}
	return b.Store.Return(ctx, id)
}

func (b *brokenOrders) Stock(ctx context.Context, sku string) (int64, error) {
	if b.stock != nil {
		return b.stock(b.Store, ctx, sku)
	}
	return b.Store.Stock(ctx, sku)
}

// takeLines takes each line on its own, in the order given, stopping at the
// first refusal: the breach of an implementation without a transaction.
func takeLines(s *memorders.Store, ctx context.Context, lines []stockguard.Line) error {
	for _, l := range lines {
		if err := s.Decrement(ctx, l.SKU, l.Qty); err != nil {
			return err
		}
	}
	return nil
}

// addBack gives an order's units back with a read and a write per line.
func addBack(s *memorders.Store, ctx context.Context, lines []stockguard.Line) {
	for _, l := range lines {
		have, _ := s.Stock(ctx, l.SKU)
		s.SetStock(ctx, l.SKU, have+l.Qty)
	}
}

// sticky remembers refusals by ID.
type sticky struct {
	mu      sync.Mutex
	refused map[string]error
}

func (s *sticky) remembered(id string, place func() error) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err, ok := s.refused[id]; ok {
		return err
	}
	err := place()
	if errors.Is(err, stockguard.ErrInsufficientStock) || errors.Is(err, stockguard.ErrUnknownSKU) {
		s.refused[id] = err
	}
	return err
}

func TestCheckOrders_reportsBrokenOrders(t *testing.T) {
	var nilCtx context.Context
	tests := []struct {
		name     string
		orders   func() stockguard.Orders
		wantCase string
		wantText string
	}{
		{
			name: "retry takes again",
			orders: func() stockguard.Orders {
				return &brokenOrders{Store: memorders.New(), take: func(s *memorders.Store, ctx context.Context, id string, lines []stockguard.Line) error {
					if _, err := s.Order(ctx, id); err == nil {
						return takeLines(s, ctx, lines)
					}
					return s.Take(ctx, id, lines...)
				}}
			},
			wantCase: "Retry",
			wantText: "Stock(",
		},
		{
			name: "closed order in words of its own",
			orders: func() stockguard.Orders {
				return &brokenOrders{Store: memorders.New(), confirm: func(s *memorders.Store, ctx context.Context, id string) error {
					err := s.Confirm(ctx, id)
					if errors.Is(err, stockguard.ErrOrderClosed) {
						return fmt.Errorf("%w: confirm %q: it is returned", stockguard.ErrOrderClosed, id)
					}
					return err
				}}
			},
			wantCase: "Closed",
			wantText: "error text",
		},
		{
			name: "stock tried before the record",
			orders: func() stockguard.Orders {
				return &brokenOrders{Store: memorders.New(), take: func(s *memorders.Store, ctx context.Context, id string, lines []stockguard.Line) error {
					for _, l := range lines {
						if have, err := s.Stock(ctx, l.SKU); err == nil && have < l.Qty {
							return fmt.Errorf("%w: %s", stockguard.ErrInsufficientStock, l.SKU)
						}
					}
					return s.Take(ctx, id, lines...)
				}}
			},
			wantCase: "RetrySoldOut",
			wantText: "want success, got " + stockguard.ErrInsufficientStock.Error(),
		},
		{
			name: "concurrent retries take again",
			orders: func() stockguard.Orders {
				return &brokenOrders{Store: memorders.New(), take: func(s *memorders.Store, ctx context.Context, id string, lines []stockguard.Line) error {
					if _, err := s.Order(ctx, id); err == nil {
						// Taken again, but refusals keep the contract.
						if err := takeLines(s, ctx, strategy.SortedLines(lines)); err != nil {
							return nil
						}
					}
					return s.Take(ctx, id, lines...)
				}}
			},
			wantCase: "Concurrent",
			wantText: "units vanished",
		},
		{
			name: "partial multi-line take",
			orders: func() stockguard.Orders {
				return &brokenOrders{Store: memorders.New(), take: func(s *memorders.Store, ctx context.Context, id string, lines []stockguard.Line) error {
					err := s.Take(ctx, id, lines...)
					if errors.Is(err, stockguard.ErrInsufficientStock) {
						takeLines(s, ctx, lines)
					}
					return err
				}}
			},
			wantCase: "AllOrNothing",
			wantText: "Stock(",
		},
		{
			name: "hold never expires",
			orders: func() stockguard.Orders {
				return &brokenOrders{Store: memorders.New(), hold: func(s *memorders.Store, ctx context.Context, id string, _ time.Duration, lines []stockguard.Line) error {
					return s.Hold(ctx, id, stockguard.MaxHoldTTL, lines...)
				}}
			},
			wantCase: "Expiry",
			wantText: "Stock(",
		},
		{
			name: "hold ttl ignored",
			orders: func() stockguard.Orders {
				return &brokenOrders{Store: memorders.New(), hold: func(s *memorders.Store, ctx context.Context, id string, ttl time.Duration, lines []stockguard.Line) error {
					return s.Hold(ctx, id, max(ttl, time.Hour), lines...)
				}}
			},
			wantCase: "Hold",
			wantText: "deadline",
		},
		{
			name: "double return",
			orders: func() stockguard.Orders {
				return &brokenOrders{Store: memorders.New(), ret: func(s *memorders.Store, ctx context.Context, id string) error {
					if info, err := s.Order(ctx, id); err == nil && !info.State.Open() {
						addBack(s, ctx, info.Lines)
					}
					return s.Return(ctx, id)
				}}
			},
			wantCase: "Return",
			wantText: "Stock(",
		},
		{
			name: "expired hold given back again by Return",
			orders: func() stockguard.Orders {
				return &brokenOrders{Store: memorders.New(), ret: func(s *memorders.Store, ctx context.Context, id string) error {
					if info, err := s.Order(ctx, id); err == nil && info.State == stockguard.OrderExpired {
						addBack(s, ctx, info.Lines)
					}
					return s.Return(ctx, id)
				}}
			},
			wantCase: "Expiry",
			wantText: "Stock(",
		},
		{
			name: "Confirm after expiry accepted",
			orders: func() stockguard.Orders {
				return &brokenOrders{Store: memorders.New(), confirm: func(s *memorders.Store, ctx context.Context, id string) error {
					if info, err := s.Order(ctx, id); err == nil && info.State == stockguard.OrderExpired {
						return nil
					}
					return s.Confirm(ctx, id)
				}}
			},
			wantCase: "Expiry",
			wantText: "Confirm(",
		},
		{
			name: "failed take recorded",
			orders: func() stockguard.Orders {
				st := &sticky{refused: map[string]error{}}
				return &brokenOrders{
					Store: memorders.New(),
					take: func(s *memorders.Store, ctx context.Context, id string, lines []stockguard.Line) error {
						return st.remembered(id, func() error { return s.Take(ctx, id, lines...) })
					},
					hold: func(s *memorders.Store, ctx context.Context, id string, ttl time.Duration, lines []stockguard.Line) error {
						return st.remembered(id, func() error { return s.Hold(ctx, id, ttl, lines...) })
					},
				}
			},
			wantCase: "Refused",
			wantText: "want success",
		},
		{
			name: "nil context panics",
			orders: func() stockguard.Orders {
				return &brokenOrders{Store: memorders.New(), stock: func(s *memorders.Store, ctx context.Context, sku string) (int64, error) {
					if err := ctx.Err(); err != nil {
						return 0, err
					}
					return s.Stock(ctx, sku)
				}}
			},
			wantCase: "NilContext",
			wantText: "panicked",
		},
		{
			name: "nil context accepted",
			orders: func() stockguard.Orders {
				return &brokenOrders{Store: memorders.New(), take: func(s *memorders.Store, ctx context.Context, id string, lines []stockguard.Line) error {
					if ctx == nilCtx {
						ctx = context.Background()
					}
					return s.Take(ctx, id, lines...)
				}}
			},
			wantCase: "NilContext",
			wantText: "want stockguard: invalid request",
		},
		{
			name: "validation after the context",
			orders: func() stockguard.Orders {
				return &brokenOrders{Store: memorders.New(), hold: func(s *memorders.Store, ctx context.Context, id string, ttl time.Duration, lines []stockguard.Line) error {
					if err := strategy.Canceled(ctx); err != nil {
						return err
					}
					return s.Hold(ctx, id, ttl, lines...)
				}}
			},
			wantCase: "InvalidInput",
			wantText: "dead ctx: Hold(",
		},
		{
			name: "mismatch answered as a retry",
			orders: func() stockguard.Orders {
				return &brokenOrders{Store: memorders.New(), take: func(s *memorders.Store, ctx context.Context, id string, lines []stockguard.Line) error {
					if err := s.Take(ctx, id, lines...); !errors.Is(err, stockguard.ErrOrderMismatch) {
						return err
					}
					return nil
				}}
			},
			wantCase: "Mismatch",
			wantText: "want stockguard: order mismatch",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			inst := tt.orders()
			vs := (stocktest.Suite{}).CheckOrders(t.Context(), func() stockguard.Orders { return inst })
			for _, v := range vs {
				if strings.HasPrefix(v.Case, tt.wantCase) && strings.Contains(v.Detail, tt.wantText) {
					return
				}
			}
			t.Errorf("no %s violation containing %q; got %v", tt.wantCase, tt.wantText, vs)
		})
	}
}

// Footprint as a strategy's test wires it: here a count of what the
// reference store holds plus the stray keys a broken strategy creates.
func TestCheckOrders_footprintCatchesKeysForUnknownSKUs(t *testing.T) {
	store := memorders.New()
	var mu sync.Mutex
	fences := map[string]bool{}
	inst := &brokenOrders{Store: store, take: func(s *memorders.Store, ctx context.Context, id string, lines []stockguard.Line) error {
		err := s.Take(ctx, id, lines...)
		if errors.Is(err, stockguard.ErrUnknownSKU) {
			mu.Lock()
			fences["fence:"+id] = true
			mu.Unlock()
		}
		return err
	}}
	suite := stocktest.Suite{Footprint: func(ctx context.Context) (int64, error) {
		n, err := store.Footprint(ctx)
		mu.Lock()
		defer mu.Unlock()
		return n + int64(len(fences)), err
	}}
	vs := suite.CheckOrders(t.Context(), func() stockguard.Orders { return inst })
	for _, v := range vs {
		if v.Case == "UnknownSKU" && strings.Contains(v.Detail, "footprint") {
			return
		}
	}
	t.Errorf("no UnknownSKU footprint violation; got %v", vs)
}

// lossy is the reference behind a network that loses requests and
// replies: some calls are applied and some not, and both report
// ErrOutcomeUnknown.
type lossy struct {
	*memorders.Store
	mu  sync.Mutex
	rng *rand.Rand
}

// call makes apply, or not, and may report ErrOutcomeUnknown instead of
// its result.
func (l *lossy) call(apply func() error) error {
	l.mu.Lock()
	p := l.rng.Float64()
	l.mu.Unlock()
	switch {
	case p < 0.1: // request lost
		return fmt.Errorf("%w: request lost", stockguard.ErrOutcomeUnknown)
	case p < 0.2: // reply lost
		apply()
		return fmt.Errorf("%w: reply lost", stockguard.ErrOutcomeUnknown)
	}
	return apply()
}

func (l *lossy) Take(ctx context.Context, id string, lines ...stockguard.Line) error {
	return l.call(func() error { return l.Store.Take(ctx, id, lines...) })
}

func (l *lossy) Hold(ctx context.Context, id string, ttl time.Duration, lines ...stockguard.Line) error {
	return l.call(func() error { return l.Store.Hold(ctx, id, ttl, lines...) })
}

func (l *lossy) Confirm(ctx context.Context, id string) error {
	return l.call(func() error { return l.Store.Confirm(ctx, id) })
}

func (l *lossy) Return(ctx context.Context, id string) error {
	return l.call(func() error { return l.Store.Return(ctx, id) })
}

func (l *lossy) Restock(ctx context.Context, id, sku string, qty int64) error {
	return l.call(func() error { return l.Store.Restock(ctx, id, sku, qty) })
}

// An exactly-once store behind a lossy network conforms: the concurrent
// case repeats every call whose outcome is unknown, and the one-order
// history lets such a call take effect or not.
func TestCheckOrders_outcomeUnknownIsRetried(t *testing.T) {
	inst := &lossy{Store: memorders.New(), rng: rand.New(rand.NewPCG(1, 2))}
	for _, c := range (stocktest.Suite{}).OrdersCases() {
		if c.Name != "Concurrent" && c.Name != "Linearizable/OneOrder" {
			continue
		}
		t.Run(c.Name, func(t *testing.T) {
			for _, v := range c.Check(t.Context(), stocktest.NewOrdersSubject(func() stockguard.Orders { return inst })) {
				t.Error(v)
			}
		})
	}
}
