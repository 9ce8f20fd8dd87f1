package ordersload

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/stockguard/stockguard"
	"github.com/stockguard/stockguard/strategy"
)

// Repeats has workers goroutines take orders on insts — instances over
// one store, of any strategies — as a careful caller does: about a
// quarter of the calls under a deadline of 1–20ms, and a call that ends
// without a definite answer (ErrOutcomeUnknown, the context's error,
// ErrContention, ErrUnavailable) repeated with the same ID on a random
// instance until one comes; restocks run among them, so that units come
// back while abandoned attempts still run. Once every abandoned write has
// ended (settle waits for that: no statement of the store still runs), it
// fails t unless each order's definite answer agrees with the ledger — an
// order refused for want of units is recorded nowhere, one acknowledged
// is recorded with its lines — and every SKU's units add up. Nothing it
// checks depends on timing.
func Repeats(t *testing.T, insts []stockguard.Orders, settle func(), workers, orders int) {
	t.Helper()
	ctx := t.Context()
	const skus, initial = 4, 20
	sku := stock(t, insts[0], "rsku", skus, initial)
	type answer struct {
		id    string
		lines []stockguard.Line
		err   error // nil or a refusal
	}
	var (
		mu       sync.Mutex
		answers  []answer
		restocks = map[string]string{} // restock ID → SKU, each answered nil
		next     = make(chan int, orders)
	)
	for i := range orders {
		next <- i
	}
	close(next)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(w), 36))
			// call repeats f on random instances until its answer is
			// definite; the first few tries may run under short deadlines.
			call := func(f func(context.Context, stockguard.Orders) error) error {
				for try := 0; ; try++ {
					cctx, cancel := ctx, context.CancelFunc(func() {})
					if try < 4 && rng.IntN(4) == 0 {
						cctx, cancel = context.WithTimeout(ctx, time.Duration(1+rng.IntN(20))*time.Millisecond)
					}
					err := f(cctx, insts[rng.IntN(len(insts))])
					cancel()
					switch {
					case ctx.Err() != nil:
						return ctx.Err()
					case err == nil, errors.Is(err, stockguard.ErrInsufficientStock), errors.Is(err, stockguard.ErrUnknownSKU):
						return err
					case errors.Is(err, stockguard.ErrOutcomeUnknown), errors.Is(err, context.DeadlineExceeded),
						errors.Is(err, stockguard.ErrContention), errors.Is(err, stockguard.ErrUnavailable):
						continue
					}
					return err
				}
			}
			for i := range next {
				if i%4 == 3 {
					rid := fmt.Sprintf("rrestock-%d", i)
					rs := sku(rng.IntN(skus))
					err := call(func(ctx context.Context, o stockguard.Orders) error { return o.Restock(ctx, rid, rs, 2) })
					if err != nil {
						t.Errorf("Restock(%s): %v", rid, err)
						continue
					}
					mu.Lock()
					restocks[rid] = rs
					mu.Unlock()
					continue
				}
				id := fmt.Sprintf("rid-%d", i)
				n := 1 + rng.IntN(2)
				lines := make([]stockguard.Line, n)
				for k, s := range rng.Perm(skus)[:n] {
					lines[k] = stockguard.Line{SKU: sku(s), Qty: 1 + rng.Int64N(2)}
				}
				err := call(func(ctx context.Context, o stockguard.Orders) error { return o.Take(ctx, id, lines...) })
				if err != nil && !errors.Is(err, stockguard.ErrInsufficientStock) {
					t.Errorf("Take(%s): %v", id, err)
					continue
				}
				mu.Lock()
				answers = append(answers, answer{id, lines, err})
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	settle()
	refused := 0
	out := map[string]int64{}
	for _, a := range answers {
		info, err := insts[0].Order(ctx, a.id)
		switch {
		case a.err != nil:
			refused++
			if !errors.Is(err, stockguard.ErrUnknownOrder) {
				t.Errorf("%s was refused (%v), yet the ledger says %+v, %v", a.id, a.err, info, err)
			}
		case err != nil:
			t.Errorf("%s was acknowledged, yet Order: %v", a.id, err)
		case info.State != stockguard.OrderTaken || !strategy.SameLines(info.Lines, a.lines):
			t.Errorf("%s was acknowledged with %v, yet the ledger says %+v", a.id, a.lines, info)
		}
		if err == nil {
			for _, ln := range info.Lines {
				out[ln.SKU] += ln.Qty
			}
		}
	}
	t.Logf("%d orders, %d refused, %d restocks", len(answers), refused, len(restocks))
	in := map[string]int64{}
	for _, rs := range restocks {
		in[rs] += 2
	}
	for i := range skus {
		s := sku(i)
		left, err := insts[0].Stock(ctx, s)
		if err != nil {
			t.Fatalf("Stock(%s): %v", s, err)
		}
		if initial+in[s] != left+out[s] {
			t.Errorf("%s: initial %d + restocked %d != stock %d + taken %d", s, initial, in[s], left, out[s])
		}
	}
}

// RepeatAgrees fails t unless o's record of id agrees with what its two
// attempts were told: first, whose caller left while it ran, and repeat,
// made after it. A repeat refused for want of units, or a first attempt
// answered with its context's error (nothing applied), leaves id recorded
// nowhere. It reports whether id is recorded, for checks of the units.
func RepeatAgrees(t *testing.T, o stockguard.Orders, id string, first, repeat error) (recorded bool) {
	t.Helper()
	_, err := o.Order(t.Context(), id)
	recorded = err == nil
	if !recorded && !errors.Is(err, stockguard.ErrUnknownOrder) {
		t.Fatalf("Order(%q): %v", id, err)
	}
	if errors.Is(repeat, stockguard.ErrInsufficientStock) && recorded {
		t.Fatalf("the repeat was refused (%v), yet the order is recorded: the first attempt, answered %v, was written after its caller left", repeat, first)
	}
	if errors.Is(first, context.Canceled) && recorded {
		t.Fatalf("the first attempt was answered %v (nothing applied), yet the order is recorded", first)
	}
	return recorded
}
