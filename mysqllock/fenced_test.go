package mysqllock

import (
	"errors"
	"testing"

	"github.com/stockguard/stockguard"
)

func TestFencedStore_WriteFenced(t *testing.T) {
	db := testDB(t, interpolate)
	table := newTable(t, db)
	f, err := NewFencedStore(db, WithTable(table))
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	if err := f.SetStock(ctx, "sku", 10); err != nil {
		t.Fatal(err)
	}
	stock := func(want int64) {
		t.Helper()
		if got, err := f.Stock(ctx, "sku"); err != nil || got != want {
			t.Fatalf("Stock = %d, %v; want %d", got, err, want)
		}
	}
	if err := f.WriteFenced(ctx, "sku", 9, 5); err != nil {
		t.Fatal(err)
	}
	stock(9)
	// A stale holder (lower token) and a replay (same token) are refused.
	for _, token := range []int64{3, 5} {
		err := f.WriteFenced(ctx, "sku", 1, token)
		if !errors.Is(err, stockguard.ErrFenced) {
			t.Errorf("token %d after 5: %v, want ErrFenced", token, err)
		}
		contractOne(t, err, stockguard.ErrContention)
		stock(9)
	}
	if err := f.WriteFenced(ctx, "sku", 8, 6); err != nil {
		t.Fatal(err)
	}
	stock(8)
	// Re-stocking keeps the fence: the stale holder stays fenced off.
	if err := f.SetStock(ctx, "sku", 100); err != nil {
		t.Fatal(err)
	}
	if err := f.WriteFenced(ctx, "sku", 1, 4); !errors.Is(err, stockguard.ErrFenced) {
		t.Errorf("token 4 after a re-stock: %v, want ErrFenced", err)
	}
	stock(100)
	var fence int64
	if err := db.Get(&fence, "SELECT fence FROM "+quote(table)+" WHERE sku = 'sku'"); err != nil || fence != 6 {
		t.Errorf("fence %d, %v; want 6", fence, err)
	}
	contractOne(t, f.WriteFenced(ctx, "never-stocked", 1, 7), stockguard.ErrUnknownSKU)
	if _, err := f.Stock(ctx, "never-stocked"); !errors.Is(err, stockguard.ErrUnknownSKU) {
		t.Errorf("WriteFenced created the row: %v", err)
	}
}

func TestFencedStore_WriteFenced_invalid(t *testing.T) {
	f, err := NewFencedStore(nil) // rejected before any I/O
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		sku        string
		qty, token int64
	}{
		{"sku", 1, 0}, {"sku", 1, -1}, {"sku", -1, 1}, {"sku", stockguard.MaxQty + 1, 1}, {"", 1, 1}, {"a\nb", 1, 1},
	} {
		contractOne(t, f.WriteFenced(t.Context(), c.sku, c.qty, c.token), stockguard.ErrInvalidRequest)
	}
}
