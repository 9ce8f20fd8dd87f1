package redislock

import (
	"context"
	"errors"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stockguard/stockguard"
	"github.com/stockguard/stockguard/internal/backends/backendstest"
	"github.com/stockguard/stockguard/internal/must"
	"github.com/stockguard/stockguard/internal/rediskeys"
	"github.com/stockguard/stockguard/internal/redistest"
	"github.com/stockguard/stockguard/stocktest"
	"github.com/stockguard/stockguard/strategy"
)

func TestRedlockGuarded_conformance(t *testing.T) {
	_, clients := masters(t, 3)
	prefix := lockPrefix(t)
	// Every call takes a Redlock on three masters: under a loaded race
	// run one SKU's 64 goroutines once needed more than the default
	// 2-minute guard to sell it out.
	stocktest.Suite{Timeout: 10 * time.Minute}.Run(t, func(t *testing.T) stockguard.Inventory {
		return must.New(NewRedlockGuarded(clients, WithPrefix(prefix), WithNodeTimeout(testNodeTimeout)))
	})
}

// afterRead is a go-redis hook that calls fn once, after the first GET of
// key has been answered: between a Guarded request's read and its write.
type afterRead struct {
	key  string
	done atomic.Bool
	fn   func(ctx context.Context)
}

func (h *afterRead) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *afterRead) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		err := next(ctx, cmd)
		if a := cmd.Args(); cmd.Name() == "get" && len(a) == 2 && a[1] == h.key && h.done.CompareAndSwap(false, true) {
			h.fn(ctx)
		}
		return err
	}
}

func (h *afterRead) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// TestRedlockGuarded_staleHolderIsRefused lets a holder's lock run out
// (deleted on every master) between its read and its write, and another
// holder decrement meanwhile: the stale write must be refused, not undo the
// other one.
func TestRedlockGuarded_staleHolderIsRefused(t *testing.T) {
	servers, clients := masters(t, 3)
	prefix := lockPrefix(t)
	ctx := t.Context()
	var others []redis.UniversalClient
	for _, s := range servers {
		c := s.Client()
		t.Cleanup(func() { c.Close() })
		others = append(others, c)
	}
	other, err := NewRedlockGuarded(others, WithPrefix(prefix), WithNodeTimeout(testNodeTimeout))
	if err != nil {
		t.Fatal(err)
	}
	keys := rediskeys.Keys{Prefix: prefix}
	for _, tc := range []struct {
		attempts int
		want     error
		left     int64
	}{
		{1, stockguard.ErrContention, 9}, // refused, given up: only the other's unit gone
		{2, nil, 7},                      // refused, retried on a fresh read: both taken
	} {
		if err := other.SetStock(ctx, "sku", 10); err != nil {
			t.Fatal(err)
		}
		hook := &afterRead{key: keys.Stock("sku"), fn: func(ctx context.Context) {
			for _, c := range others {
				c.Del(ctx, keys.Lock("sku")) // the lease "ran out"
			}
			if err := other.Decrement(ctx, "sku", 1); err != nil {
				t.Errorf("the other holder's Decrement: %v", err)
			}
		}}
		stock := servers[0].Client()
		stock.AddHook(hook)
		g := must.New(NewRedlockGuarded(append([]redis.UniversalClient{stock}, clients[1:]...), WithPrefix(prefix),
			WithNodeTimeout(testNodeTimeout), WithRetry(strategy.RetryPolicy{MaxAttempts: tc.attempts})))
		err := g.Decrement(ctx, "sku", 2)
		stock.Close()
		if !errors.Is(err, tc.want) {
			t.Fatalf("attempts %d: Decrement = %v, want %v", tc.attempts, err, tc.want)
		}
		if tc.want != nil && !errors.Is(err, ErrNotHeld) {
			t.Fatalf("attempts %d: Decrement = %v, want it to say the lock was not held", tc.attempts, err)
		}
		if !hook.done.Load() {
			t.Fatalf("attempts %d: the other holder never ran", tc.attempts)
		}
		if n, err := other.Stock(ctx, "sku"); err != nil || n != tc.left {
			t.Fatalf("attempts %d: Stock = %d, %v; want %d", tc.attempts, n, err, tc.left)
		}
	}
}

// TestRedlockGuarded_stockMasterMustGrant holds the lock on the stock's
// master only: the other two masters are a quorum, but a request must not
// read or write without the stock master's copy, and must give the quorum
// back.
func TestRedlockGuarded_stockMasterMustGrant(t *testing.T) {
	_, clients := masters(t, 3)
	prefix := lockPrefix(t)
	ctx := t.Context()
	g, err := NewRedlockGuarded(clients, WithPrefix(prefix), WithNodeTimeout(testNodeTimeout),
		WithRetry(strategy.RetryPolicy{MaxAttempts: 3}))
	if err != nil {
		t.Fatal(err)
	}
	if err := g.SetStock(ctx, "sku", 10); err != nil {
		t.Fatal(err)
	}
	lockKey := rediskeys.Keys{Prefix: prefix}.Lock("sku")
	if err := clients[0].Set(ctx, lockKey, "stranger", 10*time.Second).Err(); err != nil {
		t.Fatal(err)
	}
	if err := g.Decrement(ctx, "sku", 1); !errors.Is(err, stockguard.ErrContention) || !errors.Is(err, ErrNotObtained) {
		t.Fatalf("Decrement with the stock master's lock held elsewhere = %v, want ErrContention (not obtained)", err)
	}
	if n := g.Retries(); n != 2 {
		t.Errorf("Retries = %d, want 2", n)
	}
	if n, err := g.Stock(ctx, "sku"); err != nil || n != 10 {
		t.Fatalf("Stock = %d, %v; want 10 untouched", n, err)
	}
	if on := lockedOn(t, g.locks.(*redlockLocks).r, clients, "sku"); !slices.Equal(on, []int{0}) {
		t.Fatalf("lock held on masters %v, want only the stranger's on 0", on)
	}
	clients[0].Del(ctx, lockKey)
	if err := g.Decrement(ctx, "sku", 1); err != nil {
		t.Fatalf("Decrement once the stranger is gone: %v", err)
	}
}

func TestRedlockGuarded_WithStockMaster(t *testing.T) {
	_, clients := masters(t, 3)
	prefix := lockPrefix(t)
	ctx := t.Context()
	g, err := NewRedlockGuarded(clients, WithPrefix(prefix), WithNodeTimeout(testNodeTimeout), WithStockMaster(2))
	if err != nil {
		t.Fatal(err)
	}
	if err := g.SetStock(ctx, "sku", 10); err != nil {
		t.Fatal(err)
	}
	if err := g.Decrement(ctx, "sku", 4); err != nil {
		t.Fatal(err)
	}
	stockKey := rediskeys.Keys{Prefix: prefix}.Stock("sku")
	for i, c := range clients {
		want := map[bool]string{true: "6", false: ""}[i == 2]
		if got := c.Get(ctx, stockKey).Val(); got != want {
			t.Errorf("master %d holds %q, want %q", i, got, want)
		}
	}
	for _, i := range []int{-1, 3} {
		if bad, err := NewRedlockGuarded(clients, WithPrefix(prefix), WithStockMaster(i)); bad != nil || !errors.Is(err, stockguard.ErrInvalidRequest) {
			t.Errorf("WithStockMaster(%d) of 3 masters: NewRedlockGuarded = %v, %v; want nil and ErrInvalidRequest", i, bad, err)
		}
	}
	if n, err := g.Stock(ctx, "sku"); n != 6 || err != nil {
		t.Errorf("Stock after the invalid ones = %d, %v; want 6", n, err)
	}
}

// BenchmarkGuarded_redlockVsSingle measures one uncontended Decrement
// (lock, read, guarded write, release) with NewGuarded's single-master lock
// and with NewRedlockGuarded over 3 private masters, the stock on the first
// of them in both cases, in one run.
func BenchmarkGuarded_redlockVsSingle(b *testing.B) {
	servers := backendstest.PrivateRedis(b, 3)
	clients := make([]redis.UniversalClient, len(servers))
	for i, s := range servers {
		c := s.Client()
		b.Cleanup(func() { c.Close() })
		clients[i] = c
	}
	// Generous retries: a release that a stalled machine failed to send in
	// time leaves a lock behind until its TTL, which should slow the run
	// down, not fail it.
	retry := WithRetry(strategy.RetryPolicy{MaxAttempts: 50})
	for _, s := range []struct {
		name string
		inv  stockguard.Inventory
	}{
		{"lock=single/masters=1", must.New(NewGuarded(clients[0], WithPrefix("bench:"), retry))},
		{"lock=redlock/masters=3", must.New(NewRedlockGuarded(clients, WithPrefix("bench:"), retry))},
	} {
		b.Run(s.name, func(b *testing.B) {
			sku := redistest.HotSKU(b, s.inv)
			redistest.DecrementN(b, s.inv, sku, 1, 100) // connections dialled, scripts loaded
			b.ResetTimer()
			redistest.DecrementN(b, s.inv, sku, 1, b.N)
		})
	}
}
