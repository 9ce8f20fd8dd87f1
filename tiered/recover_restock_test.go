package tiered

import (
	"errors"
	"testing"

	"github.com/stockguard/stockguard"
)

// After Recover, an ID Restock applied is answered as the contract says
// for one (ErrOrderMismatch from Confirm, Return and Order: a restock is
// no order), as the front answered it before it lost its data — not as an
// ID nobody applied.
func TestRecover_restockID_isAMismatch(t *testing.T) {
	ctx := t.Context()
	r := newLostRig(t)
	stock(t, r.o, 10, "a")
	if err := r.o.Restock(ctx, "restock-1", "a", 5); err != nil {
		t.Fatal(err)
	}
	check := func(when string) {
		t.Helper()
		if err := r.o.Confirm(ctx, "restock-1"); !errors.Is(err, stockguard.ErrOrderMismatch) {
			t.Errorf("%s: Confirm of a restock's ID = %v, want ErrOrderMismatch", when, err)
		}
		if err := r.o.Return(ctx, "restock-1"); !errors.Is(err, stockguard.ErrOrderMismatch) {
			t.Errorf("%s: Return of a restock's ID = %v, want ErrOrderMismatch", when, err)
		}
		if _, err := r.o.Order(ctx, "restock-1"); !errors.Is(err, stockguard.ErrOrderMismatch) {
			t.Errorf("%s: Order of a restock's ID = %v, want ErrOrderMismatch", when, err)
		}
		if err := r.o.Take(ctx, "restock-1", line("a", 1)); !errors.Is(err, stockguard.ErrOrderMismatch) {
			t.Errorf("%s: Take under a restock's ID = %v, want ErrOrderMismatch", when, err)
		}
	}
	check("before the loss")
	r.restart(t)
	if err := r.o.Recover(ctx, []string{"a"}, []string{"restock-1"}); err != nil {
		t.Fatal(err)
	}
	check("after Recover")
	wantStock(t, "front", r.o, "a", 15)
}
