package netns

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stockguard/stockguard"
)

// The first attempt's caller leaves after Leave (its deadline, and a
// Redis client's read timeout); the link stays cut for CutFor from the
// attempt on, so that the kernel still holds the attempt when its caller
// has left and its repeat was refused.
const (
	Leave  = 500 * time.Millisecond
	CutFor = 2 * time.Second
)

// RefusedRepeat runs an order whose first attempt the kernel retransmits
// after its repeat was refused, and fails t if the order is recorded.
// first's one connection crosses n's link; repeat reaches the same store
// another way; open counts first's connections the server still has. SKU
// s starts sold out: first's order of it is sent while the link drops
// every packet, its caller leaves, repeat's attempt is refused, the unit
// comes back, and the link heals. Once the server has ended first's
// connection (its FIN follows the order), order x must be recorded
// nowhere and the unit still on the shelf.
func (n *NS) RefusedRepeat(t *testing.T, first, repeat stockguard.Orders, open func() int) {
	t.Helper()
	ctx := t.Context()
	must := func(what string, err error) {
		t.Helper()
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
	must("SetStock s", repeat.SetStock(ctx, "s", 0))
	must("SetStock z", repeat.SetStock(ctx, "z", 1))
	// An order through the link first: the connection is open and ready,
	// so the order below is sent at once, on it.
	must("the warm-up order", first.Take(ctx, "warm", stockguard.Line{SKU: "z", Qty: 1}))
	if k := open(); k != 1 {
		t.Fatalf("%d connections through the link before the cut, want 1", k)
	}

	n.Cut(t)
	cut := time.Now()
	fctx, cancel := context.WithTimeout(ctx, Leave)
	firstErr := first.Take(fctx, "x", stockguard.Line{SKU: "s", Qty: 1})
	cancel()
	if !errors.Is(firstErr, stockguard.ErrOutcomeUnknown) && !errors.Is(firstErr, context.DeadlineExceeded) {
		t.Fatalf("the first attempt, sent into the cut link, answered %v; want ErrOutcomeUnknown or its deadline after %v", firstErr, Leave)
	}
	repeatErr := repeat.Take(ctx, "x", stockguard.Line{SKU: "s", Qty: 1})
	if !errors.Is(repeatErr, stockguard.ErrInsufficientStock) {
		t.Fatalf("the repeat answered %v, want ErrInsufficientStock", repeatErr)
	}
	must("SetStock s after the refusal", repeat.SetStock(ctx, "s", 1))
	if open() == 0 {
		t.Fatal("the server ended the first attempt's connection while the link was cut: nothing is left to retransmit")
	}
	time.Sleep(time.Until(cut.Add(CutFor)))
	n.Heal(t)
	healed := time.Now()
	for open() > 0 {
		if time.Since(healed) > time.Minute {
			t.Fatal("the first attempt's connection is still open a minute after the link healed")
		}
		time.Sleep(20 * time.Millisecond)
	}
	delivered := time.Since(healed).Round(time.Millisecond)
	switch info, err := repeat.Order(ctx, "x"); {
	case err == nil:
		t.Fatalf("kernel retransmission: order x is recorded (%v %v), though its repeat was refused (%v) and its first attempt answered %v; "+
			"the first attempt, held by the kernel while the link was cut for %v, was applied when it was retransmitted, within %v of the heal",
			info.State, info.Lines, repeatErr, firstErr, CutFor, delivered)
	case !errors.Is(err, stockguard.ErrUnknownOrder):
		t.Fatalf("Order(x): %v", err)
	}
	if k, err := repeat.Stock(ctx, "s"); err != nil || k != 1 {
		t.Fatalf("Stock(s) = %d, %v after the order was refused and the unit came back; want 1", k, err)
	}
	t.Logf("first attempt answered %v, repeat %v; the connection ended within %v of the heal; order x recorded nowhere", firstErr, repeatErr, delivered)
}
