package redislock

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/stockguard/stockguard"
	"github.com/stockguard/stockguard/internal/backends/backendstest"
	"github.com/stockguard/stockguard/internal/must"
	"github.com/stockguard/stockguard/internal/redistest"
)

// streamed is an Orders of NewAtomic or NewBatched with an order stream.
type streamed interface {
	stockguard.Orders
	Held(ctx context.Context, sku string) (level, held int64, err error)
}

// The constructors whose Orders take WithOrderStream.
var streamedOrders = []struct {
	name string
	new  func(rdb *redis.Client, opts ...Option) (streamed, error)
}{
	{"atomic", func(rdb *redis.Client, opts ...Option) (streamed, error) { return NewAtomic(rdb, opts...) }},
	{"batched", func(rdb *redis.Client, opts ...Option) (streamed, error) { return NewBatched(rdb, opts...) }},
}

// Every final effect is in the stream once, in the order applied; holds,
// expiries, returned holds and retries add nothing.
func TestOrders_WithOrderStream_appendsFinalEffectsOnce(t *testing.T) {
	for _, c := range streamedOrders {
		t.Run(c.name, func(t *testing.T) {
			rdb := backendstest.RedisClient(t)
			prefix := redistest.Prefix(t, rdb)
			stream := prefix + "effects"
			a, err := c.new(rdb, WithPrefix(prefix), WithOrderStream(stream))
			if err != nil {
				t.Fatal(err)
			}
			appendsFinalEffectsOnce(t, rdb, a, stream)
		})
	}
}

func appendsFinalEffectsOnce(t *testing.T, rdb *redis.Client, a streamed, stream string) {
	ctx := t.Context()
	stockAll(t, a, 100, "a", "b")
	calls := []struct {
		name string
		do   func() error
	}{
		{"take t1", func() error { return a.Take(ctx, "t1", line("a", 2), line("b", 1)) }},
		{"retry t1", func() error { return a.Take(ctx, "t1", line("b", 1), line("a", 2)) }},
		{"hold h1", func() error { return a.Hold(ctx, "h1", time.Minute, line("a", 3)) }},
		{"confirm h1", func() error { return a.Confirm(ctx, "h1") }},
		{"confirm h1 again", func() error { return a.Confirm(ctx, "h1") }},
		{"return t1", func() error { return a.Return(ctx, "t1") }},
		{"return t1 again", func() error { return a.Return(ctx, "t1") }},
		{"hold h2", func() error { return a.Hold(ctx, "h2", time.Minute, line("b", 4)) }},
		{"return h2", func() error { return a.Return(ctx, "h2") }},
		{"hold h3", func() error { return a.Hold(ctx, "h3", time.Millisecond, line("b", 5)) }},
		{"restock", func() error { return a.Restock(ctx, "r1", "a", 7) }},
	}
	for _, c := range calls {
		if err := c.do(); err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
	}
	time.Sleep(5 * time.Millisecond)
	if _, err := a.Order(ctx, "h3"); err != nil { // expires it
		t.Fatal(err)
	}
	if err := a.Confirm(ctx, "h3"); !errors.Is(err, stockguard.ErrOrderClosed) {
		t.Fatalf("confirm of an expired hold: %v", err)
	}

	msgs, err := rdb.XRange(ctx, stream, "-", "+").Result()
	if err != nil {
		t.Fatal(err)
	}
	want := []map[string]any{
		{"o": "T", "i": "t1", "=a": "2", "=b": "1", "^a": "98", "^b": "99"},
		{"o": "T", "i": "h1", "=a": "3", "^a": "95"},
		{"o": "R", "i": "t1", "=a": "2", "=b": "1"},
	}
	if len(msgs) != len(want) {
		t.Fatalf("stream holds %d entries, want %d: %v", len(msgs), len(want), msgs)
	}
	for i, m := range msgs {
		if len(m.Values) != len(want[i]) {
			t.Errorf("entry %d = %v, want %v", i, m.Values, want[i])
			continue
		}
		for k, v := range want[i] {
			if m.Values[k] != v {
				t.Errorf("entry %d = %v, want %v", i, m.Values, want[i])
				break
			}
		}
	}
}

// Orders placed at once on a Batched, which combines them into script
// calls, each append their take once.
func TestBatched_WithOrderStream_concurrentTakesAppendOnce(t *testing.T) {
	rdb := backendstest.RedisClient(t)
	prefix := redistest.Prefix(t, rdb)
	stream := prefix + "effects"
	b, err := NewBatched(rdb, WithPrefix(prefix), WithOrderStream(stream))
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	stockAll(t, b, 100, "a", "b")
	const n = 40
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			id := fmt.Sprintf("o%d", i)
			for range 2 { // the repeat changes nothing
				if err := b.Take(ctx, id, line("a", 1), line("b", 2)); err != nil {
					t.Errorf("take %s: %v", id, err)
				}
			}
		})
	}
	wg.Wait()
	msgs, err := rdb.XRange(ctx, stream, "-", "+").Result()
	if err != nil {
		t.Fatal(err)
	}
	ids := map[string]int{}
	for _, m := range msgs {
		if m.Values["o"] != "T" || m.Values["=a"] != "1" || m.Values["=b"] != "2" {
			t.Errorf("entry %v, want a take of a:1 and b:2", m.Values)
		}
		ids[fmt.Sprint(m.Values["i"])]++
	}
	if len(msgs) != n || len(ids) != n {
		t.Errorf("stream holds %d entries of %d orders, want %d of %d", len(msgs), len(ids), n, n)
	}
	wantLevels(t, b, map[string]int64{"a": 100 - n, "b": 100 - 2*n})
}

func TestAtomic_WithOrderStream_refusals(t *testing.T) {
	rdb := backendstest.RedisClient(t)
	prefix := redistest.Prefix(t, rdb)
	a, err := NewAtomic(rdb, WithPrefix(prefix), WithOrderStream(prefix+"effects"))
	if err != nil {
		t.Fatal(err)
	}
	stockAll(t, a, 10, "a")
	if err := a.Decrement(t.Context(), "a", 1); !errors.Is(err, stockguard.ErrInvalidRequest) {
		t.Errorf("Decrement with a stream: %v, want ErrInvalidRequest", err)
	}
	b := must.New(NewBatched(rdb, WithPrefix(prefix), WithOrderStream(prefix+"effects")))
	if err := b.Decrement(t.Context(), "a", 1); !errors.Is(err, stockguard.ErrInvalidRequest) {
		t.Errorf("Batched's Decrement with a stream: %v, want ErrInvalidRequest", err)
	}
	two := newOrders(rdb, prefix, true, WithOrderStream(prefix+"effects"))
	if err := two.Take(t.Context(), "x", line("a", 1)); !errors.Is(err, stockguard.ErrInvalidRequest) {
		t.Errorf("a two-phase Take with a stream: %v, want ErrInvalidRequest", err)
	}
	wantLevels(t, a, map[string]int64{"a": 10})
	if empty, err := NewAtomic(rdb, WithPrefix(prefix), WithOrderStream("")); empty != nil || !errors.Is(err, stockguard.ErrInvalidRequest) {
		t.Errorf("NewAtomic(WithOrderStream(\"\")) = %v, %v; want nil, ErrInvalidRequest", empty, err)
	}
}

func TestAtomic_Held_countsDueHoldsWithoutReclaiming(t *testing.T) {
	rdb := backendstest.RedisClient(t)
	prefix := redistest.Prefix(t, rdb)
	a, err := NewAtomic(rdb, WithPrefix(prefix))
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	stockAll(t, a, 10, "a")
	if err := a.Hold(ctx, "h1", time.Minute, line("a", 2)); err != nil {
		t.Fatal(err)
	}
	if err := a.Take(ctx, "t1", line("a", 1)); err != nil {
		t.Fatal(err)
	}
	if err := a.Hold(ctx, "h2", time.Millisecond, line("a", 3)); err != nil {
		t.Fatal(err)
	}
	time.Sleep(5 * time.Millisecond)
	if level, held, err := a.Held(ctx, "a"); err != nil || level != 4 || held != 5 {
		t.Errorf("Held = %d, %d, %v; want 4, 5 (h2 due, not reclaimed)", level, held, err)
	}
	wantLevels(t, a, map[string]int64{"a": 7}) // Stock reclaims h2
	if level, held, err := a.Held(ctx, "a"); err != nil || level != 7 || held != 2 {
		t.Errorf("Held after the reclaim = %d, %d, %v; want 7, 2", level, held, err)
	}
	if _, _, err := a.Held(ctx, "nope"); !errors.Is(err, stockguard.ErrUnknownSKU) {
		t.Errorf("Held of an unknown SKU: %v", err)
	}
}

// SetStockHeld reads the holds in the script that sets the level: the open
// one, not the one due, which it gives back first.
func TestAtomic_SetStockHeld_readsTheHoldsAsItSets(t *testing.T) {
	rdb := backendstest.RedisClient(t)
	a := must.New(NewAtomic(rdb, WithPrefix(redistest.Prefix(t, rdb))))
	ctx := t.Context()
	stockAll(t, a, 10, "a")
	if err := a.Hold(ctx, "open", time.Minute, line("a", 2)); err != nil {
		t.Fatal(err)
	}
	if err := a.Hold(ctx, "due", time.Millisecond, line("a", 4)); err != nil {
		t.Fatal(err)
	}
	time.Sleep(5 * time.Millisecond)
	if held, err := a.SetStockHeld(ctx, "a", 20); err != nil || held != 2 {
		t.Errorf("SetStockHeld = %d, %v; want 2 (the open hold; the due one given back first)", held, err)
	}
	if level, held, err := a.Held(ctx, "a"); err != nil || level != 20 || held != 2 {
		t.Errorf("Held after SetStockHeld = %d, %d, %v; want 20, 2", level, held, err)
	}
	if _, err := a.SetStockHeld(ctx, "a", -1); !errors.Is(err, stockguard.ErrInvalidRequest) {
		t.Errorf("SetStockHeld of -1: %v, want ErrInvalidRequest", err)
	}
}
