package pglock

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stockguard/stockguard"
	"github.com/stockguard/stockguard/internal/must"
	"github.com/stockguard/stockguard/strategy"
)

// A fenced view writes while the fence holds its epoch; once AdvanceFence
// moved it on, the view's Take and Return change nothing and answer
// ErrFenced, and the view at the new number writes.
func TestFenced_refusesAnOlderEpoch(t *testing.T) {
	db := testDB(t)
	for name, back := range map[string]interface {
		stockguard.Orders
		strategy.Fencer
	}{"atomic": must.New(NewAtomic(db, WithTable(newTable(t, db)))), "batched": must.New(NewBatched(db, WithTable(newTable(t, db))))} {
		t.Run(name, func(t *testing.T) {
			ctx := t.Context()
			if err := back.SetStock(ctx, "a", 10); err != nil {
				t.Fatal(err)
			}
			old := back.Fenced("shop:effects", 0)
			if err := old.Take(ctx, "o1", stockguard.Line{SKU: "a", Qty: 1}); err != nil {
				t.Fatalf("Take under the fence's epoch = %v", err)
			}
			if n, err := back.AdvanceFence(ctx, "shop:effects"); err != nil || n != 1 {
				t.Fatalf("AdvanceFence = %d, %v; want 1", n, err)
			}
			if err := old.Take(ctx, "o2", stockguard.Line{SKU: "a", Qty: 1}); !errors.Is(err, strategy.ErrFenced) || !errors.Is(err, stockguard.ErrUnavailable) {
				t.Errorf("Take under an older epoch = %v, want ErrFenced (ErrUnavailable)", err)
			}
			if err := old.Return(ctx, "o1"); !errors.Is(err, strategy.ErrFenced) {
				t.Errorf("Return under an older epoch = %v, want ErrFenced", err)
			}
			if n, err := back.Stock(ctx, "a"); err != nil || n != 9 {
				t.Errorf("Stock = %d, %v; want 9: the fenced calls changed nothing", n, err)
			}
			if _, err := back.Order(ctx, "o2"); !errors.Is(err, stockguard.ErrUnknownOrder) {
				t.Errorf("Order(o2) = %v, want ErrUnknownOrder", err)
			}
			now := back.Fenced("shop:effects", 1)
			if err := now.Return(ctx, "o1"); err != nil {
				t.Errorf("Return under the new epoch = %v", err)
			}
			if n, err := back.Stock(ctx, "a"); err != nil || n != 10 {
				t.Errorf("Stock = %d, %v; want 10", n, err)
			}
			// Another name is a fence of its own.
			if err := back.Fenced("other", 0).Take(ctx, "o3", stockguard.Line{SKU: "a", Qty: 1}); err != nil {
				t.Errorf("Take under another fence = %v", err)
			}
		})
	}
}

// AdvanceFence waits for a fenced transaction in flight: it returns only
// after that transaction committed, so no write of the older epoch lands
// after it.
func TestAdvanceFence_waitsForTheTransactionInFlight(t *testing.T) {
	db := testDB(t)
	back := must.New(NewAtomic(db, WithTable(newTable(t, db))))
	ctx := t.Context()
	if err := back.SetStock(ctx, "a", 10); err != nil {
		t.Fatal(err)
	}
	view := back.Fenced("f", 0).(*Atomic)
	// A transaction of the view, open, its fence check done.
	conn, err := db.Connx(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	tx, err := conn.BeginTxx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := view.fenced(ctx, tx); err != nil {
		t.Fatal(err)
	}
	advanced := make(chan error, 1)
	go func() { _, err := back.AdvanceFence(context.WithoutCancel(ctx), "f"); advanced <- err }()
	// The advance waits for the transaction: the server shows its statement
	// waiting for the shared lock (seen by the server, not by a timer).
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		var waiting int
		if err := db.GetContext(ctx, &waiting, "SELECT COUNT(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query LIKE $1", "INSERT INTO "+quote(FencesTable(view.table))+"%"); err != nil {
			t.Fatal(err)
		}
		if waiting > 0 {
			break
		}
		select {
		case err := <-advanced:
			t.Fatalf("AdvanceFence = %v while a fenced transaction held the fence", err)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatal("AdvanceFence never waited")
		}
	}
	select {
	case err := <-advanced:
		t.Fatalf("AdvanceFence = %v while a fenced transaction held the fence", err)
	default:
	}
	if _, err := tx.ExecContext(ctx, "UPDATE "+quote(view.table)+" SET qty = qty - 1 WHERE sku = 'a'"); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	if err := <-advanced; err != nil {
		t.Fatal(err)
	}
}
