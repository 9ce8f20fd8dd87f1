package redislock

import (
	"errors"
	"testing"
	"time"

	"github.com/stockguard/stockguard"
	"github.com/stockguard/stockguard/internal/backends/backendstest"
	"github.com/stockguard/stockguard/internal/redistest"
)

// Every final effect is in the stream once, in the order applied; holds,
// expiries, returned holds and retries add nothing.
func TestAtomic_WithOrderStream_appendsFinalEffectsOnce(t *testing.T) {
	rdb := backendstest.RedisClient(t)
	prefix := redistest.Prefix(t, rdb)
	stream := prefix + "effects"
	a, err := NewAtomic(rdb, WithPrefix(prefix), WithOrderStream(stream))
	if err != nil {
		t.Fatal(err)
	}
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
		{"o": "T", "i": "t1", "=a": "2", "=b": "1"},
		{"o": "T", "i": "h1", "=a": "3"},
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
