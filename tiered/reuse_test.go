package tiered

import (
	"errors"
	"testing"
	"time"

	"github.com/stockguard/stockguard"
	"github.com/stockguard/stockguard/internal/must"
	"github.com/stockguard/stockguard/redislock"
)

// An order or restock ID reused after the front forgot it
// (WithOrderRetention) is refused on the front while the back remembers it:
// answered from the back's ledger, never applied afresh on the front
// alone; the tiers agree.
func TestOrders_idReusedPastTheFrontsRetention_tiersAgree(t *testing.T) {
	ctx := t.Context()
	r := newRig(t)
	o := must.New(New(r.rdb, r.back, WithPrefix(r.prefix), WithFront(redislock.WithOrderRetention(time.Second))))
	stock(t, o, 10, "a")
	if err := o.Take(ctx, "reused-1", line("a", 1)); err != nil {
		t.Fatal(err)
	}
	if err := o.Restock(ctx, "restock-1", "a", 2); err != nil {
		t.Fatal(err)
	}
	c := r.consumer(nil)
	r.applyAll(t, c)
	for { // the front forgets both IDs a second after their last change
		// (a restock's is a mismatch either way: its record is watched)
		_, err1 := o.Order(ctx, "reused-1")
		n, err2 := r.rdb.Exists(ctx, recordKeys(r.prefix).Name("order", "restock-1")).Result()
		if err2 != nil {
			t.Fatal(err2)
		}
		if errors.Is(err1, stockguard.ErrUnknownOrder) && n == 0 {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	// A restock's ID the front forgot is still the contract's mismatch for
	// Confirm, Return and Order: the back has it.
	if _, err := o.Order(ctx, "restock-1"); !errors.Is(err, stockguard.ErrOrderMismatch) {
		t.Errorf("Order of a forgotten restock's ID = %v, want ErrOrderMismatch", err)
	}
	if err := o.Return(ctx, "restock-1"); !errors.Is(err, stockguard.ErrOrderMismatch) {
		t.Errorf("Return of a forgotten restock's ID = %v, want ErrOrderMismatch", err)
	}
	// Answered from the back's ledger, nothing applied afresh on the front.
	if err := o.Take(ctx, "reused-1", line("a", 1)); err != nil {
		t.Errorf("reused Take, the same lines = %v, want nil (taken already)", err)
	}
	if err := o.Take(ctx, "reused-1", line("a", 2)); !errors.Is(err, stockguard.ErrOrderMismatch) {
		t.Errorf("reused Take, other lines = %v, want ErrOrderMismatch", err)
	}
	if err := o.Restock(ctx, "restock-1", "a", 2); err != nil {
		t.Errorf("reused Restock = %v, want nil (restocked already)", err)
	}
	if _, err := o.Order(ctx, "reused-1"); !errors.Is(err, stockguard.ErrUnknownOrder) {
		t.Errorf("Order of a forgotten ID = %v, want ErrUnknownOrder", err)
	}
	wantStock(t, "front", o, "a", 11)
	r.applyAll(t, c)
	tiersAgree(t, o, r.back, "a")
}
