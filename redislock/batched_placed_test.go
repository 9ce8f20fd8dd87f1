package redislock

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stockguard/stockguard"
	"github.com/stockguard/stockguard/internal/redistest"
)

// sharing returns another Batched instance over b's keys, with a client of
// its own.
func sharing(t *testing.T, b *Batched) *Batched {
	t.Helper()
	rdb := redis.NewClient(&redis.Options{Addr: b.orders.rdb.(*redis.Client).Options().Addr})
	t.Cleanup(func() { rdb.Close() })
	c, err := NewBatched(rdb, WithPrefix(b.orders.keys.Prefix))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// A Confirm or Return of an order the instance placed itself goes into a
// batch on the lines it placed, with no read of the record first; one of
// an order placed elsewhere reads it.
func TestBatched_Confirm_placedHereSkipsTheRead(t *testing.T) {
	b := gatedOrders(t, newGate(), nil, 10, "a", "b")
	var seen atomic.Int64 // HGETALLs sent
	b.orders.rdb.(*redis.Client).AddHook(redistest.OnProcess(func(_ context.Context, cmd redis.Cmder) error {
		if cmd.Name() == "hgetall" {
			seen.Add(1)
		}
		return nil
	}))
	ctx := t.Context()
	if err := b.Hold(ctx, "h1", time.Minute, line("a", 2)); err != nil {
		t.Fatal(err)
	}
	if err := b.Confirm(ctx, "h1"); err != nil {
		t.Fatal(err)
	}
	if err := b.Take(ctx, "t1", line("b", 1), line("a", 1)); err != nil {
		t.Fatal(err)
	}
	if err := b.Return(ctx, "t1"); err != nil {
		t.Fatal(err)
	}
	if err := b.Return(ctx, "t1"); err != nil {
		t.Fatalf("Return again: %v", err)
	}
	if n := seen.Load(); n != 1 {
		// The second Return of t1 reads: the first one's success dropped it.
		t.Errorf("%d record reads, want 1", n)
	}
	batchedState(t, b, "h1", stockguard.OrderTaken)
	batchedState(t, b, "t1", stockguard.OrderReturned)
	wantLevels(t, b, map[string]int64{"a": 8, "b": 10})

	other := sharing(t, b)
	if err := other.Hold(ctx, "h2", time.Minute, line("b", 3)); err != nil {
		t.Fatal(err)
	}
	if err := b.Confirm(ctx, "h2"); err != nil {
		t.Fatal(err)
	}
	if n := seen.Load(); n != 2 {
		t.Errorf("%d record reads, want 2: the Confirm of an order placed elsewhere reads its record", n)
	}
	batchedState(t, b, "h2", stockguard.OrderTaken)
	wantLevels(t, b, map[string]int64{"a": 8, "b": 7})
}

// The lines an instance remembers for an ID are only a guess: once the ID
// was placed anew elsewhere with other lines (its record past its
// retention), a Return acts on the record's lines, never on the
// remembered ones.
func TestBatched_Return_idPlacedElsewhereSinceActsOnItsRecord(t *testing.T) {
	b := gatedOrders(t, newGate(), nil, 10, "a", "b")
	ctx := t.Context()
	if err := b.Take(ctx, "x", line("a", 1)); err != nil {
		t.Fatal(err)
	}
	// Past its retention: the record is gone, and the ID is free again.
	if err := b.orders.rdb.(*redis.Client).Del(ctx, b.orders.orderKey("x")).Err(); err != nil {
		t.Fatal(err)
	}
	if err := sharing(t, b).Take(ctx, "x", line("b", 2)); err != nil {
		t.Fatal(err)
	}
	if err := b.Return(ctx, "x"); err != nil {
		t.Fatal(err)
	}
	batchedState(t, b, "x", stockguard.OrderReturned)
	wantLevels(t, b, map[string]int64{"a": 9, "b": 10})
	if err := b.Confirm(ctx, "x"); err == nil {
		t.Error("Confirm of the returned order: nil, want ErrOrderClosed")
	}
}
