package mysqllock

import (
	"fmt"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/stockguard/stockguard"
	"github.com/stockguard/stockguard/internal/combine/combinetest"
	"github.com/stockguard/stockguard/internal/must"
)

// Order calls made while a read is in flight go out as one read, and each
// gets the answer a read of its own gives: an order taken, returned or
// held, a hold past its deadline (read again by itself, which reclaims
// it), a restock's ID and an unknown one.
func TestBatched_Order_callsAtOnceShareOneRead(t *testing.T) {
	ctx := t.Context()
	db := testDB(t, interpolate)
	db.SetMaxOpenConns(1) // the test holds the one connection to queue the calls
	table := newTable(t, db)
	b := must.New(NewBatched(db, WithTable(table)))
	if err := b.SetStock(ctx, "a", 10); err != nil {
		t.Fatal(err)
	}
	for _, err := range []error{
		b.Take(ctx, "taken", line("a", 1)),
		b.Take(ctx, "returned", line("a", 2)),
		b.Return(ctx, "returned"),
		b.Hold(ctx, "held", time.Hour, line("a", 1)),
		b.Hold(ctx, "expired", time.Millisecond, line("a", 3)),
		b.Restock(ctx, "restock", "a", 1),
	} {
		if err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(50 * time.Millisecond) // the 1 ms hold's deadline passes
	ids := []string{"taken", "returned", "held", "expired", "restock", "unknown"}

	conn, err := db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	type answer struct {
		info stockguard.OrderInfo
		err  error
	}
	got := make([]answer, len(ids))
	var wg sync.WaitGroup
	call := func(i int) {
		wg.Go(func() { got[i].info, got[i].err = b.Order(ctx, ids[i]) })
	}
	call(0) // alone, waiting for the connection
	combinetest.Queued(t, b.reads, readQueue, 0)
	for i := 1; i < len(ids); i++ {
		call(i)
	}
	combinetest.Queued(t, b.reads, readQueue, len(ids)-1)
	conn.Close()
	wg.Wait()
	if batches, requests := b.reads.Stats(); batches != 2 || requests != int64(len(ids)) {
		t.Errorf("%d reads carried %d calls, want 2 carrying %d", batches, requests, len(ids))
	}
	for i, id := range ids {
		info, err := b.ledger.Order(ctx, id) // the read of its own
		if fmt.Sprint(got[i].err) != fmt.Sprint(err) || !reflect.DeepEqual(got[i].info, info) {
			t.Errorf("Order(%q) = %+v, %v; its own read: %+v, %v", id, got[i].info, got[i].err, info, err)
		}
	}
	if got[3].info.State != stockguard.OrderExpired || stockOf(t, b, "a") != 10-1-1+1 {
		t.Errorf("the expired hold reads %v, a has %d: want it reclaimed, 9 left", got[3].info.State, stockOf(t, b, "a"))
	}
}
