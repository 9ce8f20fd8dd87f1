package mysqllock

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/stockguard/stockguard"
	"github.com/stockguard/stockguard/internal/combine/combinetest"
	"github.com/stockguard/stockguard/internal/must"
	"github.com/stockguard/stockguard/internal/ordersload"
	"github.com/stockguard/stockguard/strategy"
)

// orderStrategies builds the strategies that implement Orders on table.
func orderStrategies(db *sqlx.DB, opts ...Option) map[string]stockguard.Orders {
	return map[string]stockguard.Orders{
		"atomic":  must.New(NewAtomic(db, opts...)),
		"batched": must.New(NewBatched(db, opts...)),
	}
}

var orderStrategyNames = []string{"atomic", "batched"}

// orderDB opens a pool for the order tests, bounded well below the
// shared server's connection limit (other packages' tests use it too):
// callers beyond it queue for a connection.
func orderDB(t testing.TB) *sqlx.DB {
	db := testDB(t, interpolate)
	db.SetMaxOpenConns(32)
	return db
}

// forOrders runs test for each Orders strategy on a table of its own.
func forOrders(t *testing.T, test func(t *testing.T, db *sqlx.DB, table string, o stockguard.Orders)) {
	db := orderDB(t)
	for _, name := range orderStrategyNames {
		t.Run(name, func(t *testing.T) {
			table := newTable(t, db)
			test(t, db, table, orderStrategies(db, WithTable(table))[name])
		})
	}
}

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
	for _, e := range strategy.ContractErrors() {
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

// wantLevels fails t unless o's stock of each SKU of levels is its level.
func wantLevels(t testing.TB, o stockguard.Orders, levels map[string]int64) {
	t.Helper()
	for sku, left := range levels {
		if got := stockOf(t, o, sku); got != left {
			t.Errorf("%s: %d left, want %d", sku, got, left)
		}
	}
}

func stateOf(t testing.TB, o stockguard.Orders, id string) stockguard.OrderState {
	t.Helper()
	info, err := o.Order(t.Context(), id)
	if err != nil {
		t.Fatalf("Order(%q): %v", id, err)
	}
	return info.State
}

// ledgerRows counts the ledger's rows for id: its order row and lines.
func ledgerRows(t testing.TB, db *sqlx.DB, table, id string) int {
	t.Helper()
	var n, m int
	if err := db.Get(&n, "SELECT COUNT(*) FROM "+quote(OrdersTable(table))+" WHERE id = ?", id); err != nil {
		t.Fatal(err)
	}
	if err := db.Get(&m, "SELECT COUNT(*) FROM "+quote(OrderLinesTable(table))+" WHERE order_id = ?", id); err != nil {
		t.Fatal(err)
	}
	return n + m
}

// Every row of the orders table in docs/design.md (section 3), in one walk per strategy.
func TestOrders_semantics(t *testing.T) {
	forOrders(t, func(t *testing.T, db *sqlx.DB, table string, o stockguard.Orders) {
		ctx := t.Context()
		for sku, qty := range map[string]int64{"a": 10, "b": 10, "c": 1} {
			if err := o.SetStock(ctx, sku, qty); err != nil {
				t.Fatal(err)
			}
		}
		// Take: all lines or none; a refusal records nothing.
		want(t, "Take short", o.Take(ctx, "t1", line("a", 2), line("c", 5)), stockguard.ErrInsufficientStock)
		want(t, "Take unknown sku", o.Take(ctx, "t1", line("a", 2), line("zz", 1)), stockguard.ErrUnknownSKU)
		if n := ledgerRows(t, db, table, "t1"); n != 0 {
			t.Fatalf("refused order left %d ledger rows", n)
		}
		want(t, "Order of refused", func() error { _, err := o.Order(ctx, "t1"); return err }(), stockguard.ErrUnknownOrder)
		if a, c := stockOf(t, o, "a"), stockOf(t, o, "c"); a != 10 || c != 1 {
			t.Fatalf("after refusals a=%d c=%d", a, c)
		}
		// The refused ID tries afresh, and then the same call is nil once.
		want(t, "Take", o.Take(ctx, "t1", line("b", 3), line("a", 2)), nil)
		want(t, "Take again", o.Take(ctx, "t1", line("a", 2), line("b", 3)), nil)
		if a, b := stockOf(t, o, "a"), stockOf(t, o, "b"); a != 8 || b != 7 {
			t.Fatalf("after take a=%d b=%d, want 8 7", a, b)
		}
		info, err := o.Order(ctx, "t1")
		if err != nil || info.State != stockguard.OrderTaken || info.ID != "t1" ||
			!strategy.SameLines(info.Lines, []stockguard.Line{line("a", 2), line("b", 3)}) || info.Lines[0].SKU != "a" || !info.Deadline.IsZero() {
			t.Fatalf("Order(t1) = %+v, %v", info, err)
		}
		// Other lines, or the other call, under a used ID.
		want(t, "Take other qty", o.Take(ctx, "t1", line("a", 3), line("b", 3)), stockguard.ErrOrderMismatch)
		want(t, "Take fewer lines", o.Take(ctx, "t1", line("a", 2)), stockguard.ErrOrderMismatch)
		want(t, "Hold under take", o.Hold(ctx, "t1", time.Hour, line("a", 2), line("b", 3)), stockguard.ErrOrderMismatch)
		want(t, "Restock under take", o.Restock(ctx, "t1", "a", 2), stockguard.ErrOrderMismatch)
		want(t, "Confirm taken", o.Confirm(ctx, "t1"), nil)
		// Return: units back exactly once.
		want(t, "Return taken", o.Return(ctx, "t1"), nil)
		want(t, "Return again", o.Return(ctx, "t1"), nil)
		if a, b := stockOf(t, o, "a"), stockOf(t, o, "b"); a != 10 || b != 10 {
			t.Fatalf("after return a=%d b=%d, want 10 10", a, b)
		}
		want(t, "Take returned", o.Take(ctx, "t1", line("a", 2), line("b", 3)), stockguard.ErrOrderClosed)
		want(t, "Confirm returned", o.Confirm(ctx, "t1"), stockguard.ErrOrderClosed)
		if s := stateOf(t, o, "t1"); s != stockguard.OrderReturned {
			t.Fatalf("state %v, want returned", s)
		}

		// Hold, Confirm, Return.
		want(t, "Hold", o.Hold(ctx, "h1", time.Hour, line("a", 4)), nil)
		want(t, "Hold again", o.Hold(ctx, "h1", time.Minute, line("a", 4)), nil)
		info, err = o.Order(ctx, "h1")
		if err != nil || info.State != stockguard.OrderHeld || time.Until(info.Deadline) < 50*time.Minute || time.Until(info.Deadline) > 70*time.Minute {
			t.Fatalf("Order(h1) = %+v, %v", info, err)
		}
		want(t, "Take under hold", o.Take(ctx, "h1", line("a", 4)), stockguard.ErrOrderMismatch)
		want(t, "Confirm", o.Confirm(ctx, "h1"), nil)
		want(t, "Confirm again", o.Confirm(ctx, "h1"), nil)
		want(t, "Hold of confirmed", o.Hold(ctx, "h1", time.Hour, line("a", 4)), nil)
		if s := stateOf(t, o, "h1"); s != stockguard.OrderTaken {
			t.Fatalf("state %v, want taken", s)
		}
		if a := stockOf(t, o, "a"); a != 6 {
			t.Fatalf("a=%d, want 6", a)
		}
		want(t, "Return confirmed", o.Return(ctx, "h1"), nil)
		want(t, "Hold returned", o.Hold(ctx, "h1", time.Hour, line("a", 4)), stockguard.ErrOrderClosed)
		if a := stockOf(t, o, "a"); a != 10 {
			t.Fatalf("a=%d, want 10", a)
		}
		want(t, "Hold", o.Hold(ctx, "h2", time.Hour, line("b", 1), line("c", 1)), nil)
		want(t, "Return held", o.Return(ctx, "h2"), nil)
		want(t, "Confirm returned hold", o.Confirm(ctx, "h2"), stockguard.ErrOrderClosed)
		if b, c := stockOf(t, o, "b"), stockOf(t, o, "c"); b != 10 || c != 1 {
			t.Fatalf("b=%d c=%d, want 10 1", b, c)
		}

		// Unknown IDs.
		want(t, "Confirm unknown", o.Confirm(ctx, "nope"), stockguard.ErrUnknownOrder)
		want(t, "Return unknown", o.Return(ctx, "nope"), stockguard.ErrUnknownOrder)
		want(t, "Order unknown", func() error { _, err := o.Order(ctx, "nope"); return err }(), stockguard.ErrUnknownOrder)

		// Restock: once per ID; an unknown SKU records nothing.
		want(t, "Restock unknown sku", o.Restock(ctx, "r1", "zz", 5), stockguard.ErrUnknownSKU)
		if n := ledgerRows(t, db, table, "r1"); n != 0 {
			t.Fatalf("refused restock left %d ledger rows", n)
		}
		want(t, "Restock", o.Restock(ctx, "r1", "c", 5), nil)
		want(t, "Restock again", o.Restock(ctx, "r1", "c", 5), nil)
		want(t, "Restock other qty", o.Restock(ctx, "r1", "c", 6), stockguard.ErrOrderMismatch)
		want(t, "Restock other sku", o.Restock(ctx, "r1", "b", 5), stockguard.ErrOrderMismatch)
		want(t, "Take under restock", o.Take(ctx, "r1", line("c", 5)), stockguard.ErrOrderMismatch)
		want(t, "Return restock", o.Return(ctx, "r1"), stockguard.ErrOrderMismatch)
		if c := stockOf(t, o, "c"); c != 6 {
			t.Fatalf("c=%d, want 6", c)
		}
		want(t, "Restock past MaxQty", o.Restock(ctx, "r2", "c", stockguard.MaxQty), stockguard.ErrInvalidRequest)
		if n := ledgerRows(t, db, table, "r2"); n != 0 {
			t.Fatalf("refused restock left %d ledger rows", n)
		}
	})
}

// A hold past its deadline is expired, its units back at once, with no
// sweeper: Order says so, Stock counts them, a buyer can take them, a
// late Confirm is refused and Return gives nothing twice.
func TestOrders_holdExpiresWithoutSweeper(t *testing.T) {
	forOrders(t, func(t *testing.T, db *sqlx.DB, table string, o stockguard.Orders) {
		ctx := t.Context()
		const lease = 50 * time.Millisecond
		var x, y, h1, h2, h3, h4, h5, t0, t1 string
		for try := 0; ; try++ {
			// Fresh SKUs and orders each try: a failed one leaves its own.
			sfx := strconv.Itoa(try)
			x, y, h1, h2, h3, h4, h5, t0, t1 = "x"+sfx, "y"+sfx, "h1-"+sfx, "h2-"+sfx, "h3-"+sfx, "h4-"+sfx, "h5-"+sfx, "t0-"+sfx, "t1-"+sfx
			for _, sku := range []string{x, y} {
				if err := o.SetStock(ctx, sku, 5); err != nil {
					t.Fatal(err)
				}
			}
			began := time.Now()
			// h1 expires unseen; the refusal of t1 must reclaim it.
			want(t, "Hold h1", o.Hold(ctx, h1, lease, line(x, 5), line(y, 2)), nil)
			// h2 expires and is found by Stock.
			want(t, "Hold h2", o.Hold(ctx, h2, lease, line(y, 3)), nil)
			err := o.Take(ctx, t0, line(x, 1))
			if errors.Is(err, stockguard.ErrInsufficientStock) {
				break
			}
			// A machine that stalled past h1's deadline before the Take
			// landed saw it expire rightly: try again (the test's own
			// timeout is the hang guard).
			if err != nil || time.Since(began) < lease {
				want(t, "Take while held", err, stockguard.ErrInsufficientStock)
			}
		}
		time.Sleep(80 * time.Millisecond)
		want(t, "Take after expiry", o.Take(ctx, t1, line(x, 5)), nil)
		if n := stockOf(t, o, y); n != 5 {
			t.Fatalf("%s=%d after both holds expired, want 5", y, n)
		}
		for _, id := range []string{h1, h2} {
			if s := stateOf(t, o, id); s != stockguard.OrderExpired {
				t.Fatalf("%s: %v, want expired", id, s)
			}
			want(t, "Confirm expired", o.Confirm(ctx, id), stockguard.ErrOrderClosed)
			want(t, "Return expired", o.Return(ctx, id), nil)
		}
		want(t, "Hold expired again", o.Hold(ctx, h2, time.Minute, line(y, 3)), stockguard.ErrOrderClosed)
		if nx, ny := stockOf(t, o, x), stockOf(t, o, y); nx != 0 || ny != 5 {
			t.Fatalf("x=%d y=%d, want 0 5: expired units came back more than once", nx, ny)
		}

		// Order alone finds an expired hold and reclaims it.
		want(t, "Hold h3", o.Hold(ctx, h3, 20*time.Millisecond, line(y, 4)), nil)
		time.Sleep(40 * time.Millisecond)
		if s := stateOf(t, o, h3); s != stockguard.OrderExpired {
			t.Fatalf("h3: %v, want expired", s)
		}
		if qty, _ := level(t, db, table, y); qty != 5 {
			t.Fatalf("y row %d after Order reported h3 expired, want 5", qty)
		}
		// A plain Decrement reclaims too before it refuses.
		want(t, "Hold h4", o.Hold(ctx, h4, 20*time.Millisecond, line(y, 5)), nil)
		time.Sleep(40 * time.Millisecond)
		want(t, "Decrement after expiry", o.Decrement(ctx, y, 5), nil)
		// Return of an expired, unreclaimed hold gives its units back once.
		if err := o.SetStock(ctx, y, 3); err != nil {
			t.Fatal(err)
		}
		want(t, "Hold h5", o.Hold(ctx, h5, 20*time.Millisecond, line(y, 3)), nil)
		time.Sleep(40 * time.Millisecond)
		want(t, "Return h5", o.Return(ctx, h5), nil)
		want(t, "Return h5 again", o.Return(ctx, h5), nil)
		if s := stateOf(t, o, h5); s != stockguard.OrderExpired {
			t.Fatalf("h5: %v, want expired", s)
		}
		if n := stockOf(t, o, y); n != 3 {
			t.Fatalf("%s=%d, want 3", y, n)
		}
	})
}

// A Confirm before the deadline keeps the hold, even once the deadline
// has passed.
func TestOrders_confirmBeforeDeadlineHolds(t *testing.T) {
	forOrders(t, func(t *testing.T, db *sqlx.DB, table string, o stockguard.Orders) {
		ctx := t.Context()
		const lease = 200 * time.Millisecond
		var id, sku string
		for try := 0; ; try++ {
			// A fresh hold and SKU each try: a failed one leaves an expired
			// hold behind.
			id, sku = fmt.Sprintf("h%d", try), fmt.Sprintf("x%d", try)
			if err := o.SetStock(ctx, sku, 3); err != nil {
				t.Fatal(err)
			}
			began := time.Now()
			want(t, "Hold", o.Hold(ctx, id, lease, line(sku, 3)), nil)
			err := o.Confirm(ctx, id)
			if err == nil {
				break
			}
			// A machine that stalled past the deadline before the Confirm
			// landed saw the hold expire rightly: try again (the test's own
			// timeout is the hang guard).
			if !errors.Is(err, stockguard.ErrOrderClosed) || time.Since(began) < lease {
				want(t, "Confirm", err, nil)
			}
		}
		time.Sleep(lease + 50*time.Millisecond) // past the deadline
		if s := stateOf(t, o, id); s != stockguard.OrderTaken {
			t.Fatalf("%v, want taken", s)
		}
		if x := stockOf(t, o, sku); x != 0 {
			t.Fatalf("%s=%d, want 0", sku, x)
		}
		want(t, "Take", o.Take(ctx, "t", line(sku, 1)), stockguard.ErrInsufficientStock)
	})
}

// The same ID sent many times at once, as retries after
// ErrOutcomeUnknown would be, takes once.
func TestAtomic_Take_retriedIDTakesOnce(t *testing.T)  { retriedIDTakesOnce(t, "atomic") }
func TestBatched_Take_retriedIDTakesOnce(t *testing.T) { retriedIDTakesOnce(t, "batched") }

func retriedIDTakesOnce(t *testing.T, name string) {
	db := orderDB(t)
	table := newTable(t, db)
	ctx := t.Context()
	// Two instances, as two processes would be.
	a, b := orderStrategies(db, WithTable(table))[name], orderStrategies(db, WithTable(table))[name]
	for _, sku := range []string{"p", "q"} {
		if err := a.SetStock(ctx, sku, 1000); err != nil {
			t.Fatal(err)
		}
	}
	const ids, tries = 16, 4
	var wg sync.WaitGroup
	errs := make(chan error, ids*tries)
	for i := range ids {
		id := fmt.Sprintf("order-%d", i)
		for k := range tries {
			inst := a
			if k%2 == 1 {
				inst = b
			}
			wg.Go(func() {
				if i%2 == 0 {
					errs <- inst.Take(ctx, id, line("p", 1)) // single-line: batched
				} else {
					errs <- inst.Take(ctx, id, line("q", 2), line("p", 1))
				}
			})
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		want(t, "Take", err, nil)
	}
	if p, q := stockOf(t, a, "p"), stockOf(t, a, "q"); p != 1000-ids || q != 1000-ids {
		t.Fatalf("p=%d q=%d, want %d %d", p, q, 1000-ids, 1000-ids)
	}
}

// Duplicate and conflicting IDs within one batch and across batches of a
// hot SKU are resolved from the record.
func TestBatched_Take_duplicatesInBatch(t *testing.T) {
	db := testDB(t, interpolate)
	table := newTable(t, db)
	ctx := t.Context()
	b, err := NewBatched(db, WithTable(table))
	if err != nil {
		t.Fatal(err)
	}
	if err := b.SetStock(ctx, "hot", 10_000); err != nil {
		t.Fatal(err)
	}
	// Recorded before: a batch meets it.
	want(t, "Take", b.Take(ctx, "old", line("hot", 1)), nil)
	const n = 200
	var wg sync.WaitGroup
	results := make([]error, n)
	for i := range n {
		wg.Go(func() {
			switch i % 4 {
			case 0:
				results[i] = b.Take(ctx, "old", line("hot", 1))
			case 1:
				results[i] = b.Take(ctx, fmt.Sprintf("id-%d", i/8), line("hot", 2)) // 2 requests per ID
			case 2:
				results[i] = b.Decrement(ctx, "hot", 1)
			case 3:
				results[i] = b.Take(ctx, "old", line("hot", 2)) // other qty
			}
		})
	}
	wg.Wait()
	for i, err := range results {
		target := error(nil)
		if i%4 == 3 {
			target = stockguard.ErrOrderMismatch
		}
		want(t, fmt.Sprintf("request %d", i), err, target)
	}
	// "old" once, 25 IDs × 2 units, 50 decrements.
	if got, wantQty := stockOf(t, b, "hot"), int64(10_000-1-25*2-50); got != wantQty {
		t.Fatalf("hot=%d, want %d", got, wantQty)
	}
	if s := b.Stats(); s.Requests <= s.Batches {
		t.Logf("no batch combined requests (%+v)", s)
	}
}

// In a batch that does not fit, the refused orders are recorded nowhere
// and the granted ones are.
func TestBatched_Take_partialBatch(t *testing.T) {
	db := testDB(t, interpolate)
	table := newTable(t, db)
	ctx := t.Context()
	b, err := NewBatched(db, WithTable(table), WithOrderLanes(1)) // one queue: the Takes below share a batch
	if err != nil {
		t.Fatal(err)
	}
	if err := b.SetStock(ctx, "hot", 10); err != nil {
		t.Fatal(err)
	}
	tx := holdRow(t, db, table, "hot", "FOR UPDATE") // lets requests queue
	first := make(chan error, 1)
	go func() { first <- b.Take(ctx, "first", line("hot", 1)) }()
	waitingOn(t, db, "") // in placeFast's UPDATE or the locking read
	results := make([]chan error, 6)
	for i := range results {
		results[i] = make(chan error, 1)
		go func() { results[i] <- b.Take(ctx, fmt.Sprintf("o%d", i), line("hot", 3)) }()
	}
	combinetest.Queued(t, b.orders, b.lanes[0], len(results))
	if err := tx.Rollback(); err != nil {
		t.Fatal(err)
	}
	want(t, "first", <-first, nil)
	granted := 0
	for i, ch := range results {
		err := <-ch
		id := fmt.Sprintf("o%d", i)
		switch {
		case err == nil:
			granted++
			if s := stateOf(t, b, id); s != stockguard.OrderTaken {
				t.Fatalf("%s: %v", id, s)
			}
		case errors.Is(err, stockguard.ErrInsufficientStock):
			if n := ledgerRows(t, db, table, id); n != 0 {
				t.Fatalf("refused %s left %d ledger rows", id, n)
			}
		default:
			t.Fatalf("%s: %v", id, err)
		}
	}
	if granted != 3 || stockOf(t, b, "hot") != 0 {
		t.Fatalf("%d granted, %d left; want 3 and 0", granted, stockOf(t, b, "hot"))
	}
}

// A hold whose deadline passes while its own batch waits for the row is
// not reclaimed by that batch: its units were never taken, so giving them
// back would make stock out of nothing (and grant a hold that cannot fit).
func TestBatched_Hold_expiredInOwnBatchIsNotReclaimed(t *testing.T) {
	db := testDB(t, interpolate)
	table := newTable(t, db)
	ctx := t.Context()
	b, err := NewBatched(db, WithTable(table))
	if err != nil {
		t.Fatal(err)
	}
	if err := b.SetStock(ctx, "hot", 1); err != nil {
		t.Fatal(err)
	}
	tx := holdRow(t, db, table, "hot", "FOR UPDATE")
	done := make(chan error, 1)
	go func() { done <- b.Hold(ctx, "h", stockguard.MinHoldTTL, line("hot", 2)) }()
	waitingOn(t, db, "")                   // in placeFast's UPDATE or the locking read
	time.Sleep(10 * stockguard.MinHoldTTL) // the hold's deadline passes while it waits
	if err := tx.Rollback(); err != nil {
		t.Fatal(err)
	}
	want(t, "Hold", <-done, stockguard.ErrInsufficientStock)
	if n := ledgerRows(t, db, table, "h"); n != 0 {
		t.Fatalf("refused hold left %d ledger rows", n)
	}
	if got := stockOf(t, b, "hot"); got != 1 {
		t.Fatalf("stock %d, want 1", got)
	}
}

// Bad input is ErrInvalidRequest before any I/O: a nil pool proves none
// is done.
func TestOrders_invalid(t *testing.T) {
	long := strings.Repeat("i", stockguard.MaxIDLen+1)
	many := make([]stockguard.Line, stockguard.MaxLines+1)
	for i := range many {
		many[i] = line(fmt.Sprintf("s%d", i), 1)
	}
	ctx := t.Context()
	var nilCtx context.Context
	for _, name := range orderStrategyNames {
		o := orderStrategies(nil)[name]
		calls := map[string]error{
			"empty id":      o.Take(ctx, "", line("a", 1)),
			"long id":       o.Take(ctx, long, line("a", 1)),
			"bad utf8 id":   o.Take(ctx, "\xff", line("a", 1)),
			"control id":    o.Confirm(ctx, "a\x00"),
			"no lines":      o.Take(ctx, "x"),
			"65 lines":      o.Take(ctx, "x", many...),
			"dup sku":       o.Hold(ctx, "x", time.Minute, line("a", 1), line("a", 2)),
			"bad sku":       o.Take(ctx, "x", line("", 1)),
			"zero qty":      o.Take(ctx, "x", line("a", 0)),
			"ttl 0":         o.Hold(ctx, "x", 0, line("a", 1)),
			"ttl negative":  o.Hold(ctx, "x", -time.Second, line("a", 1)),
			"ttl 8 days":    o.Hold(ctx, "x", 8*24*time.Hour, line("a", 1)),
			"restock qty":   o.Restock(ctx, "x", "a", -1),
			"restock id":    o.Restock(ctx, "", "a", 1),
			"return id":     o.Return(ctx, long),
			"order id":      func() error { _, err := o.Order(ctx, ""); return err }(),
			"nil ctx take":  o.Take(nilCtx, "x", line("a", 1)),
			"nil ctx order": func() error { _, err := o.Order(nilCtx, "x"); return err }(),
		}
		for what, err := range calls {
			want(t, name+": "+what, err, stockguard.ErrInvalidRequest)
		}
	}
	_, err := NewAtomic(nil, WithOrderRetention(time.Second))
	want(t, "NewAtomic: bad option", err, stockguard.ErrInvalidRequest)
	_, err = NewBatched(nil, WithOrderRetention(time.Second))
	want(t, "NewBatched: bad option", err, stockguard.ErrInvalidRequest)
	if _, err := PurgeOrders(ctx, nil, WithOrderRetention(0)); !errors.Is(err, stockguard.ErrInvalidRequest) {
		t.Fatalf("PurgeOrders: %v", err)
	}
}

// 64 goroutines over two instances place multi-line orders over 8 SKUs —
// takes, holds left to expire, confirms, returns, restocks — retrying IDs
// concurrently; afterwards every SKU's units add up and every
// acknowledged order is in a state it may be in.
// The same over a multiStatements pool, whose batches and orders go the
// one-round-trip ways; and each SKU's on_orders matches the ledger.
func TestOrders_concurrentConservation(t *testing.T) {
	bothPaths(t, func(t *testing.T, db *sqlx.DB) {
		db.SetMaxOpenConns(32) // see orderDB
		for _, name := range orderStrategyNames {
			t.Run(name, func(t *testing.T) {
				table := newTable(t, db)
				insts := []stockguard.Orders{orderStrategies(db, WithTable(table))[name], orderStrategies(db, WithTable(table))[name]}
				ordersload.Conservation(t, insts, 64, 1500)
				onOrdersMatchLedger(t, db, table)
			})
		}
	})
}

// onOrdersMatchLedger fails t unless every stock row's on_orders is the
// units of its SKU's open orders in the ledger.
func onOrdersMatchLedger(t *testing.T, db *sqlx.DB, table string) {
	t.Helper()
	ordersload.OnOrdersMatchLedger(t, db, "SELECT s.sku, s.on_orders, COALESCE(u.units, 0) AS ledger FROM "+quote(table)+" s LEFT JOIN ("+openUnitsSQL(table)+") u ON u.sku = s.sku")
}

// PurgeOrders deletes closed records past the retention, reclaims expired
// holds, and keeps held and recent orders.
func TestPurgeOrders(t *testing.T) {
	db := testDB(t, interpolate)
	table := newTable(t, db)
	ctx := t.Context()
	o, err := NewAtomic(db, WithTable(table))
	if err != nil {
		t.Fatal(err)
	}
	if err := o.SetStock(ctx, "x", 100); err != nil {
		t.Fatal(err)
	}
	want(t, "Take", o.Take(ctx, "taken-old", line("x", 1)), nil)
	want(t, "Take", o.Take(ctx, "returned-old", line("x", 1)), nil)
	want(t, "Return", o.Return(ctx, "returned-old"), nil)
	want(t, "Restock", o.Restock(ctx, "restock-old", "x", 1), nil)
	want(t, "Hold", o.Hold(ctx, "held-old", time.Hour, line("x", 1)), nil)
	want(t, "Hold", o.Hold(ctx, "expiring", 10*time.Millisecond, line("x", 2)), nil)
	want(t, "Take", o.Take(ctx, "taken-new", line("x", 1)), nil)
	// Age every record but taken-new by two days.
	if _, err := db.Exec("UPDATE " + quote(OrdersTable(table)) + " SET changed_at = changed_at - INTERVAL 2 DAY WHERE id <> 'taken-new'"); err != nil {
		t.Fatal(err)
	}
	time.Sleep(20 * time.Millisecond)
	n, err := PurgeOrders(ctx, db, WithTable(table), WithOrderRetention(24*time.Hour))
	if err != nil || n != 3 {
		t.Fatalf("PurgeOrders = %d, %v; want 3", n, err)
	}
	for id, wantRows := range map[string]int{"taken-old": 0, "returned-old": 0, "restock-old": 0, "held-old": 2, "expiring": 2, "taken-new": 1} {
		if got := ledgerRows(t, db, table, id); got != wantRows {
			t.Errorf("%s: %d ledger rows, want %d", id, got, wantRows)
		}
	}
	// The expired hold was reclaimed (and is recent now: kept): taken-old,
	// held-old and taken-new hold 3 units, restock-old added 1.
	if qty, _ := level(t, db, table, "x"); qty != 100-3+1 {
		t.Errorf("x row %d, want %d", qty, 100-3+1)
	}
	onOrdersMatchLedger(t, db, table) // taken-old's unit can no longer come back
	want(t, "Return purged", o.Return(ctx, "taken-old"), stockguard.ErrUnknownOrder)
	if s := stateOf(t, o, "held-old"); s != stockguard.OrderHeld {
		t.Errorf("held-old: %v", s)
	}
}

// A plain stock table without a ledger, made before the ledger existed,
// still refuses and reads as before.
func TestAtomic_noLedger(t *testing.T) {
	db := testDB(t, interpolate)
	table := newTable(t, db)
	for _, n := range Tables(table)[2:] {
		if _, err := db.Exec("DROP TABLE " + quote(n)); err != nil {
			t.Fatal(err)
		}
	}
	ctx := t.Context()
	for name, inv := range map[string]stockguard.Inventory{"atomic": must.New(NewAtomic(db, WithTable(table))), "batched": must.New(NewBatched(db, WithTable(table)))} {
		if err := inv.SetStock(ctx, "x", 1); err != nil {
			t.Fatal(err)
		}
		want(t, name+" Decrement", inv.Decrement(ctx, "x", 2), stockguard.ErrInsufficientStock)
		if n, err := inv.Stock(ctx, "x"); err != nil || n != 1 {
			t.Fatalf("%s Stock = %d, %v", name, n, err)
		}
	}
}

// Without the ledger's tables every Orders call is ErrUnavailable, and
// nothing changes.
func TestOrders_missingLedger(t *testing.T) {
	db := orderDB(t)
	table := newTable(t, db)
	for _, n := range Tables(table)[2:] {
		if _, err := db.Exec("DROP TABLE " + quote(n)); err != nil {
			t.Fatal(err)
		}
	}
	ctx := t.Context()
	for _, name := range orderStrategyNames {
		o := orderStrategies(db, WithTable(table))[name]
		if err := o.SetStock(ctx, "x", 5); err != nil {
			t.Fatal(err)
		}
		for what, err := range map[string]error{
			"Take":    o.Take(ctx, "a", line("x", 1)),
			"Take2":   o.Take(ctx, "a", line("x", 1), line("y", 1)),
			"Hold":    o.Hold(ctx, "a", time.Minute, line("x", 1)),
			"Confirm": o.Confirm(ctx, "a"),
			"Return":  o.Return(ctx, "a"),
			"Restock": o.Restock(ctx, "a", "x", 1),
			"Order":   func() error { _, err := o.Order(ctx, "a"); return err }(),
		} {
			want(t, name+" "+what, err, stockguard.ErrUnavailable)
		}
		if x := stockOf(t, o, "x"); x != 5 {
			t.Fatalf("%s: x=%d, want 5", name, x)
		}
	}
}
