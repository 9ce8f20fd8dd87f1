package stocktest_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/stockguard/stockguard"
	"github.com/stockguard/stockguard/internal/memorders"
	"github.com/stockguard/stockguard/stocktest"
	"github.com/stockguard/stockguard/strategy"
)

// The string checks pass on the reference for every hostile string, with
// an offline stand-in that fails every I/O after validating.
func TestStringCheck_memorders(t *testing.T) {
	store := memorders.New()
	c := &stocktest.StringCheck{
		Inventories: []stockguard.Inventory{store},
		Orders:      []stockguard.Orders{store},
		Offline:     []stockguard.Inventory{offline{store}},
	}
	if err := c.Prepare(t.Context()); err != nil {
		t.Fatal(err)
	}
	for _, s := range stocktest.HostileStrings() {
		for _, v := range append(c.SKU(t.Context(), s), c.OrderID(t.Context(), s)...) {
			t.Errorf("%q: %v", s, v)
		}
	}
}

// A store that cuts SKUs at their first space takes "a " for "a": the
// string check must say so.
func TestStringCheck_catchesTruncation(t *testing.T) {
	store := truncating{memorders.New()}
	c := &stocktest.StringCheck{Inventories: []stockguard.Inventory{store}}
	if err := c.Prepare(t.Context()); err != nil {
		t.Fatal(err)
	}
	if vs := c.SKU(t.Context(), "a"); len(vs) == 0 {
		t.Fatal(`no violation for a store that confuses "a" with "a "`)
	}
}

// offline fails every I/O of the inventory and of Take, after validating
// as the reference does.
type offline struct{ *memorders.Store }

var errOffline = fmt.Errorf("%w: offline", stockguard.ErrUnavailable)

func (o offline) SetStock(ctx context.Context, sku string, qty int64) error {
	if err := strategy.ValidateSet(sku, qty); err != nil {
		return err
	}
	return errOffline
}

func (o offline) Decrement(ctx context.Context, sku string, qty int64) error {
	if err := strategy.Validate(sku, qty); err != nil {
		return err
	}
	return errOffline
}

func (o offline) Stock(ctx context.Context, sku string) (int64, error) {
	if err := strategy.ValidateSKU(sku); err != nil {
		return 0, err
	}
	return 0, errOffline
}

func (o offline) Take(ctx context.Context, id string, lines ...stockguard.Line) error {
	if err := strategy.ValidateTake(id, lines); err != nil {
		return err
	}
	return errOffline
}

// truncating cuts every SKU at its first space, as a store that trims
// would.
type truncating struct{ *memorders.Store }

func cut(sku string) string {
	if i := strings.IndexByte(sku, ' '); i > 0 {
		return sku[:i]
	}
	return sku
}

func (s truncating) SetStock(ctx context.Context, sku string, qty int64) error {
	return s.Store.SetStock(ctx, cut(sku), qty)
}

func (s truncating) Stock(ctx context.Context, sku string) (int64, error) {
	return s.Store.Stock(ctx, cut(sku))
}
