package redislock

import (
	"context"
	crand "crypto/rand"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stockguard/stockguard"
	"github.com/stockguard/stockguard/internal/backends/backendstest"
	"github.com/stockguard/stockguard/internal/must"
	"github.com/stockguard/stockguard/internal/redistest"
	"github.com/stockguard/stockguard/stocktest"
	"github.com/stockguard/stockguard/strategy"
)

// segmentModes are the two ways a Segmented takes from a segment.
var segmentModes = []struct {
	name string
	opts []Option
}{
	{"script", nil},
	{"segmentLocks", []Option{WithSegmentLocks()}},
}

func TestSegmented_conformance(t *testing.T) {
	rdb := backendstest.RedisClient(t)
	for _, m := range segmentModes {
		t.Run(m.name, func(t *testing.T) {
			prefix := redistest.Prefix(t, rdb)
			// Stock sums segment levels read one after another, so a read
			// racing Decrements on other segments can count a later take
			// and miss an earlier one (see Segmented): not linearizable.
			suite := stocktest.Suite{StockNotLinearizable: true}
			suite.Run(t, func(t *testing.T) stockguard.Inventory {
				return must.New(NewSegmented(rdb, append(m.opts, WithPrefix(prefix))...))
			})
		})
	}
}

// TestSegmented_Decrement_noFalseSoldOut takes more units than any one
// segment holds: 10 units over 8 segments hold 2, 2, 1, 1, 1, 1, 1, 1.
func TestSegmented_Decrement_noFalseSoldOut(t *testing.T) {
	rdb := backendstest.RedisClient(t)
	for _, m := range segmentModes {
		t.Run(m.name, func(t *testing.T) {
			ctx := t.Context()
			s, err := NewSegmented(rdb, append(m.opts, WithPrefix(redistest.Prefix(t, rdb)))...)
			if err != nil {
				t.Fatal(err)
			}
			if err := s.SetStock(ctx, "sku", 10); err != nil {
				t.Fatal(err)
			}
			for _, step := range []struct {
				qty, left int64
				want      error
			}{{7, 3, nil}, {3, 0, nil}, {1, 0, stockguard.ErrInsufficientStock}} {
				if err := s.Decrement(ctx, "sku", step.qty); !errors.Is(err, step.want) || (step.want == nil) != (err == nil) {
					t.Fatalf("Decrement(%d) = %v, want %v", step.qty, err, step.want)
				}
				if n, err := s.Stock(ctx, "sku"); n != step.left || err != nil {
					t.Fatalf("after Decrement(%d): Stock = %d, %v; want %d", step.qty, n, err, step.left)
				}
			}
		})
	}
}

// soldOutExactly lets 32 goroutines over two instances buy 7 units at a
// time from 100 units until refused. Every refusal must be true when it is
// made, so exactly 100 mod 7 = 2 units must be left: a single false
// sold-out, or an oversold or lost unit, shows.
func soldOutExactly(t *testing.T, newInv func() *Segmented) {
	ctx := t.Context()
	a, b := newInv(), newInv()
	if err := a.SetStock(ctx, "hot", 100); err != nil {
		t.Fatal(err)
	}
	var acked, contention atomic.Int64
	var wg sync.WaitGroup
	for g := range 32 {
		inv := a
		if g%2 == 1 {
			inv = b
		}
		wg.Go(func() {
			for {
				err := inv.Decrement(ctx, "hot", 7)
				switch {
				case err == nil:
					acked.Add(7)
				case errors.Is(err, stockguard.ErrContention):
					contention.Add(1)
				case errors.Is(err, stockguard.ErrInsufficientStock):
					return
				default:
					t.Errorf("Decrement: %v", err)
					return
				}
			}
		})
	}
	wg.Wait()
	n, err := a.Stock(ctx, "hot")
	if err != nil {
		t.Fatal(err)
	}
	if n != 2 || acked.Load() != 98 {
		t.Fatalf("left %d and acknowledged %d of 100; want 2 and 98 (%d contention errors)", n, acked.Load(), contention.Load())
	}
	t.Logf("%d contention errors, %d+%d retries", contention.Load(), a.Retries(), b.Retries())
}

func TestSegmented_Decrement_soldOutExactlyUnderContention(t *testing.T) {
	rdb := backendstest.RedisClient(t)
	for _, m := range segmentModes {
		t.Run(m.name, func(t *testing.T) {
			prefix := redistest.Prefix(t, rdb)
			soldOutExactly(t, func() *Segmented { return must.New(NewSegmented(rdb, append(m.opts, WithPrefix(prefix))...)) })
		})
	}
}

func TestSegmented_unknownSKUCreatesNothing(t *testing.T) {
	rdb := backendstest.RedisClient(t)
	for _, m := range segmentModes {
		t.Run(m.name, func(t *testing.T) {
			ctx := t.Context()
			prefix := redistest.Prefix(t, rdb)
			s, err := NewSegmented(rdb, append(m.opts, WithPrefix(prefix))...)
			if err != nil {
				t.Fatal(err)
			}
			for _, qty := range []int64{1, 1000} {
				if err := s.Decrement(ctx, "ghost", qty); !errors.Is(err, stockguard.ErrUnknownSKU) {
					t.Fatalf("Decrement(%d) of an unknown SKU: %v, want ErrUnknownSKU", qty, err)
				}
			}
			if _, err := s.Stock(ctx, "ghost"); !errors.Is(err, stockguard.ErrUnknownSKU) {
				t.Fatalf("Stock of an unknown SKU: %v, want ErrUnknownSKU", err)
			}
			if keys := redistest.Keys(ctx, t, rdb, prefix); len(keys) > 0 {
				t.Fatalf("an unknown SKU left keys behind: %q", keys)
			}
		})
	}
}

// TestSegmented_SetStock_spreadsEvenly checks the levels in the keys
// themselves.
func TestSegmented_SetStock_spreadsEvenly(t *testing.T) {
	rdb := backendstest.RedisClient(t)
	ctx := t.Context()
	s, err := NewSegmented(rdb, WithPrefix(redistest.Prefix(t, rdb)))
	if err != nil {
		t.Fatal(err)
	}
	for _, qty := range []int64{10, 0, 7, stockguard.MaxQty} {
		if err := s.SetStock(ctx, "sku", qty); err != nil {
			t.Fatal(err)
		}
		var total int64
		for i := range DefaultSegments {
			v, err := rdb.Get(ctx, s.segKey("sku", i)).Int64()
			if err != nil {
				t.Fatal(err)
			}
			if lo := qty / DefaultSegments; v != lo && v != lo+1 {
				t.Fatalf("SetStock(%d): segment %d holds %d, want %d or %d", qty, i, v, lo, lo+1)
			}
			total += v
		}
		if total != qty {
			t.Fatalf("SetStock(%d): segments hold %d in all", qty, total)
		}
	}
}

// TestSegmented_segmentCounts shares one SKU between instances configured
// with different segment counts: the count stored by the last SetStock
// rules, whoever reads or takes.
func TestSegmented_segmentCounts(t *testing.T) {
	rdb := backendstest.RedisClient(t)
	ctx := t.Context()
	prefix := redistest.Prefix(t, rdb)
	eight, err := NewSegmented(rdb, WithPrefix(prefix))
	if err != nil {
		t.Fatal(err)
	}
	three, err := NewSegmented(rdb, WithPrefix(prefix), WithSegments(3))
	if err != nil {
		t.Fatal(err)
	}
	if err := eight.SetStock(ctx, "sku", 100); err != nil {
		t.Fatal(err)
	}
	if n, err := three.Stock(ctx, "sku"); n != 100 || err != nil {
		t.Fatalf("three-segment instance reads Stock = %d, %v; want 100", n, err)
	}
	// 20 × 5 units: more than the three-segment instance's segments hold
	// once those run dry; the rest must come from segments 3..7.
	for i := range 20 {
		if err := three.Decrement(ctx, "sku", 5); err != nil {
			t.Fatalf("Decrement #%d by the three-segment instance: %v", i+1, err)
		}
	}
	if err := three.Decrement(ctx, "sku", 1); !errors.Is(err, stockguard.ErrInsufficientStock) {
		t.Fatalf("Decrement after sell-out: %v, want ErrInsufficientStock", err)
	}
	if err := three.SetStock(ctx, "sku", 30); err != nil {
		t.Fatal(err)
	}
	for i := 3; i < DefaultSegments; i++ {
		if n := rdb.Exists(ctx, eight.segKey("sku", i)).Val(); n != 0 {
			t.Fatalf("segment %d outlived SetStock with 3 segments", i)
		}
	}
	if n, err := eight.Stock(ctx, "sku"); n != 30 || err != nil {
		t.Fatalf("eight-segment instance reads Stock = %d, %v; want 30", n, err)
	}
	for i := range 30 {
		if err := eight.Decrement(ctx, "sku", 1); err != nil {
			t.Fatalf("Decrement #%d by the eight-segment instance: %v", i+1, err)
		}
	}
	if n, err := three.Stock(ctx, "sku"); n != 0 || err != nil {
		t.Fatalf("Stock = %d, %v; want 0", n, err)
	}
}

// abandonGather plays a gatherer that dies after taking pieces: a pending
// (or aborted) record, and holds on the first segments. It returns the
// units it took.
func abandonGather(t *testing.T, s *Segmented, sku, state string, pieces int, each int64) int64 {
	t.Helper()
	ctx := t.Context()
	id := crand.Text()
	if err := s.rdb.HSet(ctx, s.metaKey(sku), "g:"+id, state).Err(); err != nil {
		t.Fatal(err)
	}
	var taken int64
	for i := range pieces {
		got, err := segmentedTakeScript.Run(ctx, s.rdb, []string{s.segKey(sku, i), s.holdKey(sku, i, id)}, each, holdTTL.Milliseconds()).Int64()
		if err != nil || got != each {
			t.Fatalf("piece %d: took %d, %v; want %d", i, got, err, each)
		}
		taken += got
	}
	return taken
}

// TestSegmented_recoversAbandonedGathers: units held by a dead gatherer
// are not sold out from under a buyer — the next gather rolls the dead one
// back and serves the buyer.
func TestSegmented_recoversAbandonedGathers(t *testing.T) {
	rdb := backendstest.RedisClient(t)
	for _, state := range []string{"p", "a"} {
		t.Run(state, func(t *testing.T) {
			ctx := t.Context()
			prefix := redistest.Prefix(t, rdb)
			s, err := NewSegmented(rdb, WithPrefix(prefix))
			if err != nil {
				t.Fatal(err)
			}
			if err := s.SetStock(ctx, "sku", 16); err != nil {
				t.Fatal(err)
			}
			held := abandonGather(t, s, "sku", state, 3, 2)
			if n, err := s.Stock(ctx, "sku"); n != 16-held || err != nil {
				t.Fatalf("Stock with %d units held = %d, %v; want %d", held, n, err, 16-held)
			}
			if err := s.Decrement(ctx, "sku", 16); err != nil {
				t.Fatalf("Decrement of every unit, %d held by a dead gather: %v", held, err)
			}
			if n, err := s.Stock(ctx, "sku"); n != 0 || err != nil {
				t.Fatalf("Stock = %d, %v; want 0", n, err)
			}
			for _, k := range redistest.Keys(ctx, t, rdb, prefix) {
				if strings.Contains(k, "seghold") {
					t.Errorf("hold %q outlived the roll-back", k)
				}
			}
			if f := rdb.HKeys(ctx, s.metaKey("sku")).Val(); len(f) != 1 {
				t.Fatalf("meta fields %q, want only the count", f)
			}
		})
	}
}

// TestSegmented_Decrement_waitsForRunningGather: while a gather holds
// units (and the gather lock), a buyer of them is told to try again, never
// that the SKU is sold out; once the gather is gone, the buyer gets them.
func TestSegmented_Decrement_waitsForRunningGather(t *testing.T) {
	rdb := backendstest.RedisClient(t)
	ctx := t.Context()
	prefix := redistest.Prefix(t, rdb)
	gatherer, err := NewSegmented(rdb, WithPrefix(prefix))
	if err != nil {
		t.Fatal(err)
	}
	if err := gatherer.SetStock(ctx, "sku", 16); err != nil {
		t.Fatal(err)
	}
	l, err := gatherer.gather.Obtain(ctx, "sku", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	held := abandonGather(t, gatherer, "sku", "p", 4, 2)
	buyer, err := NewSegmented(rdb, WithPrefix(prefix), WithRetry(strategy.RetryPolicy{MaxAttempts: 3}))
	if err != nil {
		t.Fatal(err)
	}
	if err := buyer.Decrement(ctx, "sku", 16-held+1); !errors.Is(err, stockguard.ErrContention) {
		t.Fatalf("Decrement of units a running gather holds: %v, want ErrContention", err)
	}
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if err := buyer.Decrement(ctx, "sku", 16); err != nil {
		t.Fatalf("Decrement after the gather died: %v", err)
	}
}

// TestSegmented_rolledBackGatherCannotCommit: once another gather has
// rolled a gather back, its commit fails and its units are not sold twice.
func TestSegmented_rolledBackGatherCannotCommit(t *testing.T) {
	rdb := backendstest.RedisClient(t)
	ctx := t.Context()
	s, err := NewSegmented(rdb, WithPrefix(redistest.Prefix(t, rdb)))
	if err != nil {
		t.Fatal(err)
	}
	if err := s.SetStock(ctx, "sku", 16); err != nil {
		t.Fatal(err)
	}
	abandonGather(t, s, "sku", "p", 2, 2)
	m, err := s.readMeta(ctx, "sku")
	if err != nil || len(m.gathers) != 1 {
		t.Fatalf("meta %+v, %v; want one gather", m, err)
	}
	var field string
	for id := range m.gathers {
		field = "g:" + id
	}
	if err := s.recover(ctx, "sku", m); err != nil {
		t.Fatal(err)
	}
	got, err := segmentedDecideScript.Run(ctx, s.rdb, []string{s.metaKey("sku")}, field, "c").Int64()
	if err != nil || got == 1 {
		t.Fatalf("commit after roll-back = %d, %v; want refused", got, err)
	}
	if n, err := s.Stock(ctx, "sku"); n != 16 || err != nil {
		t.Fatalf("Stock = %d, %v; want all 16 back", n, err)
	}
}

// commitHook fails the command that commits a gather: before sending it
// (lost == false), or after Redis applied it (the reply lost).
type commitHook struct{ lost bool }

func (commitHook) DialHook(next redis.DialHook) redis.DialHook { return next }

func (commitHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

func (h commitHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		a := cmd.Args()
		if len(a) < 2 || a[1] != segmentedDecideScript.Hash() || a[len(a)-1] != "c" {
			return next(ctx, cmd)
		}
		if !h.lost {
			cmd.SetErr(redis.ErrClosed)
			return cmd.Err()
		}
		_ = next(ctx, cmd)
		cmd.SetErr(errors.New("injected: connection reset after the commit was sent"))
		return cmd.Err()
	}
}

// TestSegmented_gatherCommitFails: a commit that never left is rolled
// back; one whose reply is lost is ErrOutcomeUnknown and applied whole.
func TestSegmented_gatherCommitFails(t *testing.T) {
	for _, tt := range []struct {
		name string
		lost bool
		want error
		left int64
	}{
		{"notSent", false, stockguard.ErrUnavailable, 10},
		{"replyLost", true, stockguard.ErrOutcomeUnknown, 3},
	} {
		t.Run(tt.name, func(t *testing.T) {
			ctx := t.Context()
			plain := backendstest.RedisClient(t)
			prefix := redistest.Prefix(t, plain)
			rdb := backendstest.RedisClient(t)
			rdb.AddHook(commitHook{lost: tt.lost})
			s, err := NewSegmented(rdb, WithPrefix(prefix), WithRetry(strategy.RetryPolicy{MaxAttempts: 1}))
			if err != nil {
				t.Fatal(err)
			}
			if err := s.SetStock(ctx, "sku", 10); err != nil {
				t.Fatal(err)
			}
			if err := s.Decrement(ctx, "sku", 7); !errors.Is(err, tt.want) {
				t.Fatalf("Decrement(7) with the commit failing: %v, want %v", err, tt.want)
			}
			check, err := NewSegmented(plain, WithPrefix(prefix))
			if err != nil {
				t.Fatal(err)
			}
			if n, err := check.Stock(ctx, "sku"); n != tt.left || err != nil {
				t.Fatalf("Stock = %d, %v; want %d", n, err, tt.left)
			}
			// Whatever is left sells, down to the last unit.
			if err := check.Decrement(ctx, "sku", tt.left); err != nil {
				t.Fatalf("Decrement(%d): %v", tt.left, err)
			}
			if err := check.Decrement(ctx, "sku", 1); !errors.Is(err, stockguard.ErrInsufficientStock) {
				t.Fatalf("Decrement after sell-out: %v, want ErrInsufficientStock", err)
			}
		})
	}
}

// TestSegmented_validatesBeforeIO talks to a closed client.
func TestSegmented_validatesBeforeIO(t *testing.T) {
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"})
	rdb.Close()
	s, err := NewSegmented(rdb)
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	for name, err := range map[string]error{
		"Decrement empty sku": s.Decrement(ctx, "", 1),
		"Decrement qty 0":     s.Decrement(ctx, "x", 0),
		"SetStock negative":   s.SetStock(ctx, "x", -1),
	} {
		if !errors.Is(err, stockguard.ErrInvalidRequest) {
			t.Errorf("%s: %v, want ErrInvalidRequest", name, err)
		}
	}
	if err := s.Decrement(ctx, "x", 1); !errors.Is(err, stockguard.ErrUnavailable) {
		t.Errorf("Decrement on a closed client: %v, want ErrUnavailable", err)
	}
	if err := s.SetStock(ctx, "x", 1); !errors.Is(err, stockguard.ErrUnavailable) {
		t.Errorf("SetStock on a closed client: %v, want ErrUnavailable", err)
	}
}
