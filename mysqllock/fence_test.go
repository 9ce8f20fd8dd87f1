package mysqllock

import (
	"context"
	"testing"
	"time"

	"github.com/stockguard/stockguard/internal/must"
	"github.com/stockguard/stockguard/stocktest"
)

// The fence of NewAtomic and NewBatched: stocktest's check.
func TestFenced_refusesAnOlderEpoch(t *testing.T) {
	db := orderDB(t)
	t.Run("atomic", func(t *testing.T) { stocktest.RunFencer(t, must.New(NewAtomic(db, WithTable(newTable(t, db))))) })
	t.Run("batched", func(t *testing.T) { stocktest.RunFencer(t, must.New(NewBatched(db, WithTable(newTable(t, db))))) })
}

// AdvanceFence waits for a fenced transaction in flight: it returns only
// after that transaction committed, so no write of the older epoch lands
// after it.
func TestAdvanceFence_waitsForTheTransactionInFlight(t *testing.T) {
	db := orderDB(t)
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
	// The advance waits for the transaction: the server runs its statement,
	// blocked on the shared lock (seen by the server, not by a timer).
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		var waiting int
		if err := db.GetContext(ctx, &waiting, "SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE INFO LIKE ?", "INSERT INTO `"+FencesTable(view.table)+"`%"); err != nil {
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
