package stocktest

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"testing"

	"github.com/stockguard/stockguard"
	"github.com/stockguard/stockguard/strategy"
)

// Fencer is an Orders whose writes can be fenced in the store itself
// (strategy.Fencer).
type Fencer interface {
	stockguard.Orders
	strategy.Fencer
}

// RunFencer checks back's fence: a view fenced at the fence's number
// writes; once AdvanceFence has moved the number on, the view's Take and
// Return change nothing and answer strategy.ErrFenced (an
// stockguard.ErrUnavailable), and the view at the new number writes; a
// fence of another name is a fence of its own. Its SKU, IDs and fence
// names are its own (random), so back may be shared. That AdvanceFence
// waits for a fenced transaction in flight needs the store's own test.
func RunFencer(t *testing.T, back Fencer) {
	t.Helper()
	ctx := t.Context()
	var b [4]byte
	rand.Read(b[:])
	tag := hex.EncodeToString(b[:])
	sku, fence, other := "fence-"+tag, "fence:"+tag, "other:"+tag
	id := func(n string) string { return "fence-" + tag + "-" + n }
	want := func(what string, got int64) {
		t.Helper()
		if n, err := back.Stock(ctx, sku); err != nil || n != got {
			t.Errorf("%s: Stock = %d, %v; want %d", what, n, err, got)
		}
	}
	fenced := func(what string, err error) {
		t.Helper()
		if !errors.Is(err, strategy.ErrFenced) || strategy.Contract(err) != stockguard.ErrUnavailable {
			t.Errorf("%s under an older epoch = %v, want strategy.ErrFenced (ErrUnavailable alone)", what, err)
		}
	}
	if err := back.SetStock(ctx, sku, 10); err != nil {
		t.Fatal(err)
	}
	old := back.Fenced(fence, 0)
	if err := old.Take(ctx, id("1"), stockguard.Line{SKU: sku, Qty: 1}); err != nil {
		t.Fatalf("Take under the fence's epoch (0: never advanced) = %v", err)
	}
	n, err := back.AdvanceFence(ctx, fence)
	if err != nil || n != 1 {
		t.Fatalf("AdvanceFence = %d, %v; want 1", n, err)
	}
	fenced("Take", old.Take(ctx, id("2"), stockguard.Line{SKU: sku, Qty: 1}))
	fenced("Return", old.Return(ctx, id("1")))
	want("after the refused calls", 9)
	if _, err := back.Order(ctx, id("2")); !errors.Is(err, stockguard.ErrUnknownOrder) {
		t.Errorf("Order of a Take refused by the fence = %v, want ErrUnknownOrder", err)
	}
	if info, err := old.Order(ctx, id("1")); err != nil || info.State != stockguard.OrderTaken {
		t.Errorf("Order through an older view = %+v, %v; want the order, taken (reads are not fenced)", info, err)
	}
	if err := back.Fenced(fence, n).Return(ctx, id("1")); err != nil {
		t.Errorf("Return under the new epoch = %v", err)
	}
	want("after the Return under the new epoch", 10)
	if err := back.Fenced(other, 0).Take(ctx, id("3"), stockguard.Line{SKU: sku, Qty: 1}); err != nil {
		t.Errorf("Take under another fence = %v", err)
	}
	want("after a Take under another fence", 9)
	if n, err := back.AdvanceFence(ctx, fence); err != nil || n != 2 {
		t.Errorf("AdvanceFence again = %d, %v; want 2", n, err)
	}
}
