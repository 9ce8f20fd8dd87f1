package pglock

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/stockguard/stockguard"
)

func line(sku string, qty int64) stockguard.Line { return stockguard.Line{SKU: sku, Qty: qty} }

// want fails t unless err satisfies exactly one contract error, and that
// one is target (nil: err is nil).
func want(t testing.TB, what string, err, target error) {
	t.Helper()
	if target == nil {
		if err != nil {
			t.Fatalf("%s: %v, want nil", what, err)
		}
		return
	}
	var hits []error
	for _, e := range stockguard.ContractErrors() {
		if errors.Is(err, e) {
			hits = append(hits, e)
		}
	}
	if len(hits) != 1 || hits[0] != target {
		t.Fatalf("%s: %v (matches %v), want exactly %v", what, err, hits, target)
	}
}

func stockOf(t testing.TB, o stockguard.Orders, sku string) int64 {
	t.Helper()
	n, err := o.Stock(t.Context(), sku)
	if err != nil {
		t.Fatalf("Stock(%q): %v", sku, err)
	}
	return n
}

// 64 goroutines over two instances place multi-line orders over 8 SKUs —
// takes, holds left to expire, confirms, returns, restocks — retrying IDs
// concurrently (a call may run out of retries: ErrContention, nothing
// changed); afterwards every SKU's units add up, every acknowledged
// order is in a state it may be in, and each SKU's on_orders matches the
// ledger.
func TestOrders_concurrentConservation(t *testing.T) {
	db := testDB(t)
	for _, name := range orderStrategyNames {
		t.Run(name, func(t *testing.T) {
			table := newTable(t, db)
			insts := []stockguard.Orders{orderStrategies(db, WithTable(table))[name], orderStrategies(db, WithTable(table))[name]}
			conservation(t, insts, 64, 1500)
			onOrdersMatchLedger(t, db, table)
		})
	}
}

// onOrdersMatchLedger fails t unless every stock row's on_orders is the
// units of its SKU's open orders in the ledger.
func onOrdersMatchLedger(t *testing.T, db *sqlx.DB, table string) {
	t.Helper()
	var rows []struct {
		SKU    string `db:"sku"`
		Column int64  `db:"on_orders"`
		Ledger int64  `db:"ledger"`
	}
	err := db.SelectContext(t.Context(), &rows, fmt.Sprintf("SELECT s.sku, s.on_orders, (SELECT COALESCE(SUM(l.qty), 0)::bigint FROM %s l JOIN %s o ON o.id = l.order_id WHERE l.sku = s.sku AND o.kind <> %d AND o.state IN (%d, %d)) AS ledger FROM %s s",
		quote(OrderLinesTable(table)), quote(OrdersTable(table)), kindRestock, stockguard.OrderHeld, stockguard.OrderTaken, quote(table)))
	if err != nil {
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

func conservation(t *testing.T, insts []stockguard.Orders, workers, ops int) {
	ctx := t.Context()
	// Little stock, so that SKUs sell out and refusals must reclaim holds.
	const skus, initial = 8, 50
	sku := func(i int) string { return fmt.Sprintf("sku-%d", i) }
	for i := range skus {
		if err := insts[0].SetStock(ctx, sku(i), initial); err != nil {
			t.Fatal(err)
		}
	}
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
					lines[k] = line(sku(s), 1+r.Int64N(3))
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
					// Retries ran out on 8 SKUs shared by 64 goroutines:
					// nothing changed, which the audit below checks.
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
		case !stockguard.SameLines(info.Lines, p.lines):
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
		left := stockOf(t, insts[0], s)
		if initial+in[s] != left+out[s] {
			t.Errorf("%s: initial %d + restocked %d != stock %d + taken %d", s, initial, in[s], left, out[s])
		}
	}
}
