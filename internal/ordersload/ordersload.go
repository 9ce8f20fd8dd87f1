// Package ordersload runs a concurrent load of orders over instances of
// one store and audits what it leaves: the strategies' own tests share it.
package ordersload

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/stockguard/stockguard"
	"github.com/stockguard/stockguard/strategy"
)

// Conservation has workers goroutines place ops calls on insts —
// multi-line takes, holds left to expire, confirms, returns, restocks —
// with every ID used by about three calls from any goroutine, over 8 SKUs
// of 50 units (they sell out, so refusals must reclaim holds); then it
// fails t unless every SKU's units add up (initial + restocked == stock +
// taken, as the ledger tells every ID), no order is still held after
// every deadline, and every acknowledged order has its lines and a state
// it may be in. insts are instances over one store, at least two.
func Conservation(t *testing.T, insts []stockguard.Orders, workers, ops int) {
	t.Helper()
	ctx := t.Context()
	// Little stock, so that SKUs sell out and refusals must reclaim holds.
	const skus, initial = 8, 50
	sku := stock(t, insts[0], "sku", skus, initial)
	type placed struct {
		id    string
		lines []stockguard.Line
		hold  bool
	}
	var (
		mu       sync.Mutex
		orders   []placed              // acknowledged by some call
		restocks = map[string]string{} // restock ID → SKU, every one tried
		unknown  int
		refused  int
		busy     int
		next     = make(chan int, ops)
	)
	for i := range ops {
		next <- i
	}
	close(next)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(w), 7))
			for i := range next {
				o := insts[rng.IntN(len(insts))]
				// IDs repeat: about three calls per ID, from any worker.
				id := fmt.Sprintf("id-%d", i/3)
				r := rand.New(rand.NewPCG(uint64(i/3), 1)) // same ID, same lines
				n := 1 + r.IntN(5)
				perm := r.Perm(skus)[:n]
				lines := make([]stockguard.Line, n)
				for k, s := range perm {
					lines[k] = stockguard.Line{SKU: sku(s), Qty: 1 + r.Int64N(3)}
				}
				hold := r.IntN(2) == 0
				var err error
				switch op := rng.IntN(10); {
				case op < 5 && hold:
					err = o.Hold(ctx, id, time.Duration(5+r.IntN(60))*time.Millisecond, lines...)
				case op < 5:
					err = o.Take(ctx, id, lines...)
				case op < 7:
					err = o.Confirm(ctx, id)
				case op < 9:
					err = o.Return(ctx, id)
				default:
					rid := fmt.Sprintf("restock-%d", i/2)
					rs := sku(int(rid[len(rid)-1]) % skus)
					mu.Lock()
					restocks[rid] = rs
					mu.Unlock()
					if err := o.Restock(ctx, rid, rs, 5); err != nil && !errors.Is(err, stockguard.ErrOutcomeUnknown) && !errors.Is(err, stockguard.ErrContention) {
						t.Errorf("Restock: %v", err)
					}
					continue
				}
				switch {
				case err == nil:
					mu.Lock()
					orders = append(orders, placed{id, lines, hold})
					mu.Unlock()
				case errors.Is(err, stockguard.ErrOutcomeUnknown):
					mu.Lock()
					unknown++
					mu.Unlock()
				case errors.Is(err, stockguard.ErrInsufficientStock):
					mu.Lock()
					refused++
					mu.Unlock()
				case errors.Is(err, stockguard.ErrContention):
					// A strategy's retries ran out on SKUs this many
					// goroutines share: nothing changed, which the audit
					// below checks.
					mu.Lock()
					busy++
					mu.Unlock()
				case errors.Is(err, stockguard.ErrUnknownOrder),
					errors.Is(err, stockguard.ErrOrderClosed), errors.Is(err, stockguard.ErrOrderMismatch):
				default:
					t.Errorf("%s: %v", id, err)
				}
			}
		})
	}
	wg.Wait()
	t.Logf("%d acknowledged, %d refused for want of stock, %d with unknown outcome, %d busy", len(orders), refused, unknown, busy)
	time.Sleep(70 * time.Millisecond) // every hold has expired by now
	// Conservation, from what the ledger says of every ID ever used.
	out := map[string]int64{}
	for i := range ops / 3 {
		id := fmt.Sprintf("id-%d", i)
		info, err := insts[i%2].Order(ctx, id)
		if errors.Is(err, stockguard.ErrUnknownOrder) {
			continue
		}
		if err != nil {
			t.Fatalf("Order(%s): %v", id, err)
		}
		if info.State == stockguard.OrderHeld {
			t.Errorf("%s still held after every deadline passed", id)
		}
		if info.State == stockguard.OrderTaken {
			for _, ln := range info.Lines {
				out[ln.SKU] += ln.Qty
			}
		}
	}
	states := map[string]stockguard.OrderInfo{}
	for _, p := range orders {
		if _, ok := states[p.id]; ok {
			continue
		}
		info, err := insts[0].Order(ctx, p.id)
		if err != nil {
			t.Fatalf("acknowledged order %s: %v", p.id, err)
		}
		states[p.id] = info
		switch {
		case !strategy.SameLines(info.Lines, p.lines):
			t.Errorf("%s: lines %v, placed %v", p.id, info.Lines, p.lines)
		case info.State == stockguard.OrderExpired && !p.hold:
			t.Errorf("%s: a Take is expired", p.id)
		}
	}
	// A restock repeated converges to exactly one.
	in := map[string]int64{}
	for rid, rs := range restocks {
		if err := insts[1].Restock(ctx, rid, rs, 5); err != nil {
			t.Fatalf("Restock(%s) again: %v", rid, err)
		}
		in[rs] += 5
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

// OnOrdersMatchLedger fails t unless every row query returns — a SKU
// (column sku), its stock row's on_orders and the units of its open orders
// in the ledger (column ledger) — has the two equal, and unless there is a
// row at all.
func OnOrdersMatchLedger(t *testing.T, db *sqlx.DB, query string) {
	t.Helper()
	var rows []struct {
		SKU    string `db:"sku"`
		Column int64  `db:"on_orders"`
		Ledger int64  `db:"ledger"`
	}
	if err := db.SelectContext(t.Context(), &rows, query); err != nil {
		t.Fatal(err)
	}
	if len(rows) == 0 {
		t.Fatal("no stock rows to check")
	}
	for _, r := range rows {
		if r.Column != r.Ledger {
			t.Errorf("%s: on_orders %d, the ledger's open orders %d", r.SKU, r.Column, r.Ledger)
		}
	}
}

// stock sets n SKUs named prefix-0… to qty units each and returns their
// names by index.
func stock(t *testing.T, inv stockguard.Inventory, prefix string, n int, qty int64) func(int) string {
	t.Helper()
	sku := func(i int) string { return fmt.Sprintf("%s-%d", prefix, i) }
	for i := range n {
		if err := inv.SetStock(t.Context(), sku(i), qty); err != nil {
			t.Fatal(err)
		}
	}
	return sku
}
