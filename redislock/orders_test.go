package redislock

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stockguard/stockguard"
	"github.com/stockguard/stockguard/internal/backends/backendstest"
	"github.com/stockguard/stockguard/internal/must"
	"github.com/stockguard/stockguard/internal/redistest"
	"github.com/stockguard/stockguard/stocktest"
)

// orderModes are the two ways Atomic runs an order: one script (every
// order on a single Redis), and the two-phase protocol of orders whose
// keys span cluster slots, forced here on a single Redis.
var orderModes = []struct {
	name     string
	twoPhase bool
}{
	{"oneScript", false},
	{"twoPhase", true},
}

// newOrders returns an Atomic over rdb under prefix, in mode twoPhase.
func newOrders(rdb AtomicClient, prefix string, twoPhase bool, opts ...Option) *Atomic {
	a := must.New(NewAtomic(rdb, append(opts, WithPrefix(prefix))...))
	a.twoPhase = twoPhase
	return a
}

// footprint counts the keys under prefix but the tombstones of refusals,
// for stocktest.Suite.Footprint.
func footprint(t *testing.T, rdb redis.UniversalClient, prefix string) func(ctx context.Context) (int64, error) {
	return func(ctx context.Context) (int64, error) {
		return int64(len(kept(ctx, t, rdb, prefix))), nil
	}
}

// kept lists the keys under prefix but the tombstones of refusals: order
// records that hold only one, which expire WithAttemptValidity plus twice
// WithClockSkew after the refusal, and the line records of a refused
// two-phase attempt, which expire a pending window after its undo —
// whatever anyone does, so requests that create nothing else pile up
// nothing.
func kept(ctx context.Context, t *testing.T, rdb redis.UniversalClient, prefix string) []string {
	t.Helper()
	var out []string
	for _, k := range redistest.Keys(ctx, t, rdb, prefix) {
		switch {
		case strings.HasPrefix(k, prefix+"order:"):
			f, err := rdb.HKeys(ctx, k).Result()
			if err != nil {
				t.Error(err)
			}
			if len(f) == 1 && f[0] == "x" {
				continue
			}
		case strings.HasPrefix(k, prefix+"line:"):
			v, err := rdb.Get(ctx, k).Result()
			if err != nil && err != redis.Nil {
				t.Error(err)
			}
			if ttl := rdb.PTTL(ctx, k).Val(); strings.HasPrefix(v, "x") && ttl > 0 && ttl <= pendingWindow {
				continue
			}
		}
		out = append(out, k)
	}
	return out
}

func TestAtomic_conformanceOrders(t *testing.T) {
	rdb := backendstest.RedisClient(t)
	for _, m := range orderModes {
		t.Run(m.name, func(t *testing.T) {
			prefix := redistest.Prefix(t, rdb)
			suite := stocktest.Suite{Footprint: footprint(t, rdb, prefix)}
			suite.RunOrders(t, func(t *testing.T) stockguard.Orders { return newOrders(rdb, prefix, m.twoPhase) })
		})
	}
}

// line is a stockguard.Line.
func line(sku string, qty int64) stockguard.Line { return stockguard.Line{SKU: sku, Qty: qty} }

// stockAll sets every sku to qty.
func stockAll(t *testing.T, a stockguard.Inventory, qty int64, skus ...string) {
	t.Helper()
	for _, sku := range skus {
		if err := a.SetStock(t.Context(), sku, qty); err != nil {
			t.Fatal(err)
		}
	}
}

// wantLevels checks the level of each SKU.
func wantLevels(t *testing.T, a stockguard.Inventory, want map[string]int64) {
	t.Helper()
	for sku, n := range want {
		if got, err := a.Stock(t.Context(), sku); err != nil || got != n {
			t.Errorf("Stock(%q) = %d, %v; want %d", sku, got, err, n)
		}
	}
}

// wantState checks the state Order reports for id (0: ErrUnknownOrder).
func wantState(t *testing.T, a *Atomic, id string, want stockguard.OrderState) {
	t.Helper()
	info, err := a.Order(t.Context(), id)
	switch {
	case want == 0 && !errors.Is(err, stockguard.ErrUnknownOrder):
		t.Errorf("Order(%q) = %v, %v; want ErrUnknownOrder", id, info.State, err)
	case want != 0 && (err != nil || info.State != want):
		t.Errorf("Order(%q) = %v, %v; want %v", id, info.State, err, want)
	}
}

func TestAtomic_Take_retriedIDTakesOnce(t *testing.T) {
	rdb := backendstest.RedisClient(t)
	for _, m := range orderModes {
		t.Run(m.name, func(t *testing.T) {
			a := newOrders(rdb, redistest.Prefix(t, rdb), m.twoPhase)
			ctx := t.Context()
			stockAll(t, a, 10, "a", "b")
			for range 3 {
				if err := a.Take(ctx, "o", line("b", 2), line("a", 3)); err != nil {
					t.Fatal(err)
				}
			}
			// The same lines in another order are the same order.
			if err := a.Take(ctx, "o", line("a", 3), line("b", 2)); err != nil {
				t.Fatal(err)
			}
			wantLevels(t, a, map[string]int64{"a": 7, "b": 8})
			wantState(t, a, "o", stockguard.OrderTaken)
			for name, err := range map[string]error{
				"other qty":  a.Take(ctx, "o", line("a", 4), line("b", 2)),
				"fewer":      a.Take(ctx, "o", line("a", 3)),
				"as a hold":  a.Hold(ctx, "o", time.Minute, line("a", 3), line("b", 2)),
				"as restock": a.Restock(ctx, "o", "a", 3),
			} {
				if !errors.Is(err, stockguard.ErrOrderMismatch) {
					t.Errorf("%s: %v, want ErrOrderMismatch", name, err)
				}
			}
			wantLevels(t, a, map[string]int64{"a": 7, "b": 8})
		})
	}
}

// TestAtomic_Take_allOrNothing refuses a cart on its middle line: no line
// is taken, nothing is recorded or left behind in Redis but the ID's
// tombstone, and the ID is free for the next try.
func TestAtomic_Take_allOrNothing(t *testing.T) {
	rdb := backendstest.RedisClient(t)
	for _, m := range orderModes {
		t.Run(m.name, func(t *testing.T) {
			prefix := redistest.Prefix(t, rdb)
			a := newOrders(rdb, prefix, m.twoPhase)
			ctx := t.Context()
			stockAll(t, a, 5, "a", "b", "c")
			keys := len(kept(ctx, t, rdb, prefix))
			err := a.Take(ctx, "cart", line("a", 1), line("b", 6), line("c", 1))
			if !errors.Is(err, stockguard.ErrInsufficientStock) {
				t.Fatalf("Take with a short line: %v, want ErrInsufficientStock", err)
			}
			err = a.Hold(ctx, "cart", time.Minute, line("a", 1), line("ghost", 1), line("c", 1))
			if !errors.Is(err, stockguard.ErrUnknownSKU) {
				t.Fatalf("Hold with an unknown SKU: %v, want ErrUnknownSKU", err)
			}
			if n := len(kept(ctx, t, rdb, prefix)); n != keys {
				t.Errorf("%d keys after refused orders, %d before", n, keys)
			}
			wantLevels(t, a, map[string]int64{"a": 5, "b": 5, "c": 5})
			wantState(t, a, "cart", 0)
			if err := a.Take(ctx, "cart", line("a", 1), line("b", 5), line("c", 1)); err != nil {
				t.Fatal(err)
			}
			wantLevels(t, a, map[string]int64{"a": 4, "b": 0, "c": 4})
		})
	}
}

// TestAtomic_Hold_expiresWithoutSweeper holds every unit of a SKU for
// 100ms: a buyer is refused while it lasts, and served once it has passed,
// by nothing but its own Decrement.
func TestAtomic_Hold_expiresWithoutSweeper(t *testing.T) {
	rdb := backendstest.RedisClient(t)
	for _, m := range orderModes {
		t.Run(m.name, func(t *testing.T) {
			a := newOrders(rdb, redistest.Prefix(t, rdb), m.twoPhase)
			ctx := t.Context()
			stockAll(t, a, 4, "a", "b")
			start := time.Now()
			if err := a.Hold(ctx, "h", 100*time.Millisecond, line("a", 4), line("b", 1)); err != nil {
				t.Fatal(err)
			}
			info, err := a.Order(ctx, "h")
			if err != nil || info.State != stockguard.OrderHeld || info.Deadline.Sub(start) > 5*time.Second {
				t.Fatalf("Order of a fresh hold = %+v, %v", info, err)
			}
			if err := a.Decrement(ctx, "a", 1); !errors.Is(err, stockguard.ErrInsufficientStock) {
				t.Fatalf("Decrement while held: %v, want ErrInsufficientStock", err)
			}
			time.Sleep(time.Until(info.Deadline) + 20*time.Millisecond)
			if err := a.Decrement(ctx, "a", 4); err != nil {
				t.Fatalf("Decrement of the units of an expired hold: %v", err)
			}
			wantLevels(t, a, map[string]int64{"a": 0, "b": 4})
			wantState(t, a, "h", stockguard.OrderExpired)
			if err := a.Confirm(ctx, "h"); !errors.Is(err, stockguard.ErrOrderClosed) {
				t.Errorf("Confirm of an expired hold: %v, want ErrOrderClosed", err)
			}
			if err := a.Return(ctx, "h"); err != nil {
				t.Errorf("Return of an expired hold: %v", err)
			}
			if err := a.Hold(ctx, "h", 100*time.Millisecond, line("a", 4), line("b", 1)); !errors.Is(err, stockguard.ErrOrderClosed) {
				t.Errorf("Hold again of an expired hold: %v, want ErrOrderClosed", err)
			}
			wantLevels(t, a, map[string]int64{"a": 0, "b": 4})
		})
	}
}

// TestAtomic_Orders_confirmReturnRestock walks the semantics table.
func TestAtomic_Orders_confirmReturnRestock(t *testing.T) {
	rdb := backendstest.RedisClient(t)
	for _, m := range orderModes {
		t.Run(m.name, func(t *testing.T) {
			a := newOrders(rdb, redistest.Prefix(t, rdb), m.twoPhase)
			ctx := t.Context()
			stockAll(t, a, 10, "a", "b")
			check := func(what string, err error) {
				t.Helper()
				if err != nil {
					t.Fatalf("%s: %v", what, err)
				}
			}
			check("Hold", a.Hold(ctx, "h", time.Minute, line("a", 2), line("b", 3)))
			check("Confirm", a.Confirm(ctx, "h"))
			check("Confirm again", a.Confirm(ctx, "h"))
			check("Hold again", a.Hold(ctx, "h", time.Minute, line("a", 2), line("b", 3)))
			wantState(t, a, "h", stockguard.OrderTaken)
			wantLevels(t, a, map[string]int64{"a": 8, "b": 7})
			check("Return", a.Return(ctx, "h"))
			check("Return again", a.Return(ctx, "h"))
			wantState(t, a, "h", stockguard.OrderReturned)
			wantLevels(t, a, map[string]int64{"a": 10, "b": 10})
			if err := a.Confirm(ctx, "h"); !errors.Is(err, stockguard.ErrOrderClosed) {
				t.Errorf("Confirm of a returned order: %v, want ErrOrderClosed", err)
			}
			if err := a.Take(ctx, "h", line("a", 2), line("b", 3)); !errors.Is(err, stockguard.ErrOrderMismatch) {
				t.Errorf("Take of a returned hold's lines: %v, want ErrOrderMismatch", err)
			}

			check("Take", a.Take(ctx, "t", line("a", 1)))
			check("Confirm of a take", a.Confirm(ctx, "t"))
			check("Return of a take", a.Return(ctx, "t"))
			wantLevels(t, a, map[string]int64{"a": 10})

			check("Restock", a.Restock(ctx, "r", "a", 5))
			check("Restock again", a.Restock(ctx, "r", "a", 5))
			wantLevels(t, a, map[string]int64{"a": 15})
			if err := a.Restock(ctx, "r2", "ghost", 5); !errors.Is(err, stockguard.ErrUnknownSKU) {
				t.Errorf("Restock of an unknown SKU: %v", err)
			}
			if err := a.Restock(ctx, "r3", "a", stockguard.MaxQty); !errors.Is(err, stockguard.ErrInvalidRequest) {
				t.Errorf("Restock past MaxQty: %v, want ErrInvalidRequest", err)
			}
			wantState(t, a, "r2", 0)
			wantState(t, a, "r3", 0)
			for name, err := range map[string]error{
				"Confirm": a.Confirm(ctx, "nobody"),
				"Return":  a.Return(ctx, "nobody"),
			} {
				if !errors.Is(err, stockguard.ErrUnknownOrder) {
					t.Errorf("%s of an unknown order: %v, want ErrUnknownOrder", name, err)
				}
			}
			if err := a.Confirm(ctx, "r"); !errors.Is(err, stockguard.ErrOrderMismatch) {
				t.Errorf("Confirm of a restock: %v, want ErrOrderMismatch", err)
			}
		})
	}
}

// TestAtomic_Orders_validatesBeforeIO talks to a client whose every command
// would fail: invalid requests, a nil context and a bad option must be
// rejected before any command is tried.
func TestAtomic_Orders_validatesBeforeIO(t *testing.T) {
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"})
	rdb.Close()
	ctx := t.Context()
	var nilCtx context.Context
	for _, a := range []*Atomic{must.New(NewAtomic(rdb)), newOrders(rdb, "", true)} {
		ok := []stockguard.Line{line("a", 1)}
		for name, err := range map[string]error{
			"Take no lines":     a.Take(ctx, "id"),
			"Take dup sku":      a.Take(ctx, "id", line("a", 1), line("a", 2)),
			"Take qty 0":        a.Take(ctx, "id", line("a", 0)),
			"Take empty id":     a.Take(ctx, "", ok...),
			"Take nil ctx":      a.Take(nilCtx, "id", ok...),
			"Hold ttl 0":        a.Hold(ctx, "id", 0, ok...),
			"Hold ttl 8 days":   a.Hold(ctx, "id", 8*24*time.Hour, ok...),
			"Hold nil ctx":      a.Hold(nilCtx, "id", time.Second, ok...),
			"Restock bad sku":   a.Restock(ctx, "id", "", 1),
			"Restock nil ctx":   a.Restock(nilCtx, "id", "a", 1),
			"Confirm long id":   a.Confirm(ctx, strings.Repeat("x", stockguard.MaxIDLen+1)),
			"Return control id": a.Return(ctx, "a\nb"),
			"Return nil ctx":    a.Return(nilCtx, "id"),
			"Decrement nil ctx": a.Decrement(nilCtx, "a", 1),
		} {
			if !errors.Is(err, stockguard.ErrInvalidRequest) {
				t.Errorf("%s: %v, want ErrInvalidRequest", name, err)
			}
		}
		if _, err := a.Order(nilCtx, "id"); !errors.Is(err, stockguard.ErrInvalidRequest) {
			t.Errorf("Order with a nil ctx: %v, want ErrInvalidRequest", err)
		}
		if err := a.Take(ctx, "id", ok...); !errors.Is(err, stockguard.ErrUnavailable) {
			t.Errorf("Take on a closed client: %v, want ErrUnavailable", err)
		}
	}
	if _, err := NewAtomic(rdb, WithOrderRetention(time.Millisecond)); !errors.Is(err, stockguard.ErrInvalidRequest) {
		t.Errorf("NewAtomic with a retention of 1ms: %v, want ErrInvalidRequest", err)
	}
}

// TestAtomic_Orders_concurrentCarts places carts of 1–3 lines over 4 SKUs
// from 32 goroutines in pairs that make the same calls under the same IDs
// (a client and its retry racing), holds left to expire after 100ms, some
// confirmed, some returned, and restocks; once every deadline has passed,
// each SKU must hold exactly initial + restocked - taken, and no units
// may be held.
func TestAtomic_Orders_concurrentCarts(t *testing.T) {
	rdb := backendstest.RedisClient(t)
	for _, m := range orderModes {
		t.Run(m.name, func(t *testing.T) {
			prefix := redistest.Prefix(t, rdb)
			a := newOrders(rdb, prefix, m.twoPhase)
			ctx := t.Context()
			skus := []string{"s0", "s1", "s2", "s3"}
			const initial, pairs, perPair = 60, 16, 25
			stockAll(t, a, initial, skus...)
			type plan struct {
				id      string
				kind    int // 0 take, 1 hold, 2 restock
				lines   []stockguard.Line
				confirm bool
				ret     bool
			}
			plans := make([][]plan, pairs)
			for p := range plans {
				rng := rand.New(rand.NewPCG(uint64(p), 7))
				for n := range perPair {
					pl := plan{id: fmt.Sprintf("c-%d-%d", p, n), kind: rng.IntN(3)}
					for _, i := range rng.Perm(len(skus))[:1+rng.IntN(3)] {
						pl.lines = append(pl.lines, line(skus[i], 1+rng.Int64N(4)))
					}
					if pl.kind == 2 {
						pl.lines = pl.lines[:1]
					}
					pl.confirm, pl.ret = rng.IntN(3) == 0, rng.IntN(4) == 0
					plans[p] = append(plans[p], pl)
				}
			}
			var wg sync.WaitGroup
			for g := range 2 * pairs {
				wg.Go(func() {
					for _, pl := range plans[g/2] {
						var err error
						switch pl.kind {
						case 0:
							err = a.Take(ctx, pl.id, pl.lines...)
						case 1:
							err = a.Hold(ctx, pl.id, 100*time.Millisecond, pl.lines...)
						case 2:
							err = a.Restock(ctx, pl.id, pl.lines[0].SKU, pl.lines[0].Qty)
						}
						if err != nil && !errors.Is(err, stockguard.ErrInsufficientStock) && !errors.Is(err, stockguard.ErrOrderClosed) {
							t.Errorf("%s: %v", pl.id, err)
						}
						if pl.kind == 1 && pl.confirm {
							err = a.Confirm(ctx, pl.id)
						}
						if pl.kind != 2 && pl.ret {
							err = a.Return(ctx, pl.id)
						}
						if err != nil && !errors.Is(err, stockguard.ErrUnknownOrder) && !errors.Is(err, stockguard.ErrOrderClosed) &&
							!errors.Is(err, stockguard.ErrInsufficientStock) {
							t.Errorf("%s: %v", pl.id, err)
						}
					}
				})
			}
			wg.Wait()
			time.Sleep(150 * time.Millisecond) // every hold's deadline
			want := map[string]int64{}
			for _, sku := range skus {
				want[sku] = initial
			}
			for _, ps := range plans {
				for _, pl := range ps {
					info, err := a.Order(ctx, pl.id)
					switch {
					case pl.kind == 2:
						if err := a.Restock(ctx, pl.id, pl.lines[0].SKU, pl.lines[0].Qty); err == nil {
							want[pl.lines[0].SKU] += pl.lines[0].Qty
						}
						continue
					case errors.Is(err, stockguard.ErrUnknownOrder):
						continue
					case err != nil:
						t.Fatalf("Order(%q): %v", pl.id, err)
					case info.State == stockguard.OrderHeld:
						t.Errorf("Order(%q) is held past its deadline", pl.id)
					case info.State == stockguard.OrderTaken:
						for _, l := range info.Lines {
							want[l.SKU] -= l.Qty
						}
					}
				}
			}
			wantLevels(t, a, want)
			if t.Failed() {
				for _, k := range redistest.Keys(ctx, t, rdb, prefix) {
					typ := rdb.Type(ctx, k).Val()
					switch typ {
					case "zset":
						t.Log(k, rdb.ZRangeWithScores(ctx, k, 0, -1).Val())
					case "string":
						if !strings.Contains(k, "stock:") {
							t.Log(k, rdb.Get(ctx, k).Val())
						}
					}
				}
			}
		})
	}
}

// TestOrders_actOnHoldWithALineReclaimed removes one line's member from its
// SKU's holds while the hold is still in time, as only the SKU side's
// reclaim does: the Confirm or Return that then finds it gone decides that
// the hold expired, and gives back the units of the other line, once —
// through Atomic's script and through Batched's batch alike.
func TestOrders_actOnHoldWithALineReclaimed(t *testing.T) {
	rdb := backendstest.RedisClient(t)
	for _, tc := range []struct {
		name    string
		batched bool
		confirm bool
	}{
		{"atomic/confirm", false, true},
		{"atomic/return", false, false},
		{"batched/confirm", true, true},
		{"batched/return", true, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			prefix := redistest.Prefix(t, rdb)
			a := newOrders(rdb, prefix, false)
			var o stockguard.Orders = a
			if tc.batched {
				o = must.New(NewBatched(rdb, WithPrefix(prefix)))
			}
			ctx := t.Context()
			stockAll(t, a, 10, "a", "b")
			if err := o.Hold(ctx, "h", time.Minute, line("a", 2), line("b", 3)); err != nil {
				t.Fatal(err)
			}
			// The SKU side's reclaim removes a member and gives its units back
			// in one script: this test does both.
			if n, err := rdb.ZRem(ctx, a.holdsKey("b"), "3 h").Result(); err != nil || n != 1 {
				t.Fatalf("ZREM of b's member: %d, %v", n, err)
			}
			if err := rdb.IncrBy(ctx, a.keys.Stock("b"), 3).Err(); err != nil {
				t.Fatal(err)
			}
			if tc.confirm {
				if err := o.Confirm(ctx, "h"); !errors.Is(err, stockguard.ErrOrderClosed) {
					t.Errorf("Confirm: %v, want ErrOrderClosed", err)
				}
			} else if err := o.Return(ctx, "h"); err != nil {
				t.Errorf("Return: %v, want nil", err)
			}
			wantState(t, a, "h", stockguard.OrderExpired)
			wantLevels(t, a, map[string]int64{"a": 10, "b": 10})
			if err := o.Return(ctx, "h"); err != nil {
				t.Errorf("Return again: %v", err)
			}
			wantLevels(t, a, map[string]int64{"a": 10, "b": 10})
		})
	}
}
