package redislock

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stockguard/stockguard"
	"github.com/stockguard/stockguard/internal/backends/backendstest"
	"github.com/stockguard/stockguard/internal/must"
	"github.com/stockguard/stockguard/internal/rediskeys"
	"github.com/stockguard/stockguard/internal/redistest"
	"github.com/stockguard/stockguard/internal/redisx/cutproxy"
	"github.com/stockguard/stockguard/stocktest"
)

func TestAtomic_conformance(t *testing.T) {
	rdb := backendstest.RedisClient(t)
	prefix := redistest.Prefix(t, rdb)
	stocktest.Run(t, func(t *testing.T) stockguard.Inventory { return must.New(NewAtomic(rdb, WithPrefix(prefix))) })
}

// TestAtomic_validatesBeforeIO talks to a client whose every command would
// fail; invalid requests must be rejected before any command is tried.
func TestAtomic_validatesBeforeIO(t *testing.T) {
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"})
	rdb.Close()
	a, err := NewAtomic(rdb)
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	for name, err := range map[string]error{
		"Decrement empty sku": a.Decrement(ctx, "", 1),
		"Decrement qty 0":     a.Decrement(ctx, "x", 0),
		"Decrement qty big":   a.Decrement(ctx, "x", stockguard.MaxQty+1),
		"SetStock negative":   a.SetStock(ctx, "x", -1),
		"SetStock bad utf8":   a.SetStock(ctx, "\xff", 1),
	} {
		if !errors.Is(err, stockguard.ErrInvalidRequest) {
			t.Errorf("%s: %v, want ErrInvalidRequest", name, err)
		}
	}
	if _, err := a.Stock(ctx, strings.Repeat("x", 65)); !errors.Is(err, stockguard.ErrInvalidRequest) {
		t.Errorf("Stock of a 65-byte sku: %v, want ErrInvalidRequest", err)
	}
	// A valid request reaches the closed client: nothing sent, and the
	// client cannot serve.
	if err := a.Decrement(ctx, "x", 1); !errors.Is(err, stockguard.ErrUnavailable) {
		t.Errorf("Decrement on a closed client: %v, want ErrUnavailable", err)
	}
}

func TestAtomic_Decrement_unknownSKUCreatesNothing(t *testing.T) {
	rdb := backendstest.RedisClient(t)
	prefix := redistest.Prefix(t, rdb)
	a, err := NewAtomic(rdb, WithPrefix(prefix))
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	if err := a.Decrement(ctx, "ghost", 3); !errors.Is(err, stockguard.ErrUnknownSKU) {
		t.Fatalf("Decrement of an unknown sku: %v, want ErrUnknownSKU", err)
	}
	if n := rdb.Exists(ctx, rediskeys.Keys{Prefix: prefix}.Stock("ghost")).Val(); n != 0 {
		t.Fatalf("EXISTS after Decrement of an unknown sku = %d, want 0", n)
	}
}

// checkCorrupt checks that Decrement and Stock of sku, whose stock key holds
// a corrupt value, fail clearly and leave the key as it was.
func checkCorrupt(t *testing.T, inv stockguard.Inventory, rdb redis.UniversalClient, key, sku string) {
	t.Helper()
	ctx := t.Context()
	before, err := rdb.Dump(ctx, key).Result()
	if err != nil {
		t.Fatal(err)
	}
	err = inv.Decrement(ctx, sku, 1)
	if !errors.Is(err, stockguard.ErrCorruptStock) || !errors.Is(err, stockguard.ErrUnknownSKU) {
		t.Errorf("Decrement: %v, want ErrCorruptStock and ErrUnknownSKU", err)
	}
	if _, err := inv.Stock(ctx, sku); !errors.Is(err, stockguard.ErrCorruptStock) || !errors.Is(err, stockguard.ErrUnknownSKU) {
		t.Errorf("Stock: %v, want ErrCorruptStock and ErrUnknownSKU", err)
	}
	if after := rdb.Dump(ctx, key).Val(); after != before {
		t.Errorf("the corrupt value changed")
	}
	// SetStock repairs the key.
	if err := inv.SetStock(ctx, sku, 5); err != nil {
		t.Fatalf("SetStock over a corrupt value: %v", err)
	}
	if err := inv.Decrement(ctx, sku, 2); err != nil {
		t.Fatalf("Decrement after repair: %v", err)
	}
	if n, err := inv.Stock(ctx, sku); n != 3 || err != nil {
		t.Fatalf("Stock after repair and Decrement = %d, %v; want 3", n, err)
	}
}

func TestAtomic_Decrement_corruptValue(t *testing.T) {
	rdb := backendstest.RedisClient(t)
	prefix := redistest.Prefix(t, rdb)
	a, err := NewAtomic(rdb, WithPrefix(prefix))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range redistest.CorruptValues {
		t.Run(c.Name, func(t *testing.T) {
			key := rediskeys.Keys{Prefix: prefix}.Stock(c.Name)
			if err := c.Set(t.Context(), rdb, key); err != nil {
				t.Fatal(err)
			}
			checkCorrupt(t, a, rdb, key, c.Name)
		})
	}
}

// TestAtomic_Decrement_replyLost loses the reply to the script after Redis
// ran it: the caller must hear ErrOutcomeUnknown, and the stock must have been
// taken exactly once (go-redis would resend the script by default).
func TestAtomic_Decrement_replyLost(t *testing.T) {
	srv := backendstest.SharedRedis(t)
	proxy := cutproxy.Start(t, srv.Addr)
	rdb := redis.NewClient(&redis.Options{Addr: proxy.Addr, MaxRetries: 3})
	t.Cleanup(func() { rdb.Close() })
	prefix := redistest.Prefix(t, backendstest.RedisClient(t))
	a, err := NewAtomic(rdb, WithPrefix(prefix))
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	if err := a.SetStock(ctx, "sku", 10); err != nil {
		t.Fatal(err)
	}
	if err := a.Decrement(ctx, "sku", 1); err != nil { // loads the script
		t.Fatal(err)
	}
	proxy.CutNextReply()
	if err := a.Decrement(ctx, "sku", 3); !errors.Is(err, stockguard.ErrOutcomeUnknown) {
		t.Fatalf("Decrement with its reply lost: %v, want ErrOutcomeUnknown", err)
	}
	if n, err := a.Stock(ctx, "sku"); n != 6 || err != nil {
		t.Fatalf("Stock = %d, %v; want 6 (the lost-reply decrement applied exactly once)", n, err)
	}
}

// TestAtomic_Decrement_serverPaused stops the server (SIGSTOP) before the
// script is sent: the script lands in the server's socket buffer, the reply
// never comes, the client times out. Once resumed, the server runs it.
func TestAtomic_Decrement_serverPaused(t *testing.T) {
	srv := backendstest.PrivateRedis(t, 1)[0]
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr, ReadTimeout: 200 * time.Millisecond})
	t.Cleanup(func() { rdb.Close() })
	a := must.New(NewAtomic(rdb))
	ctx := t.Context()
	if err := a.SetStock(ctx, "sku", 10); err != nil {
		t.Fatal(err)
	}
	if err := a.Decrement(ctx, "sku", 1); err != nil { // loads the script
		t.Fatal(err)
	}
	if err := srv.Proc.Pause(); err != nil {
		t.Fatal(err)
	}
	resumed := false
	t.Cleanup(func() {
		if !resumed {
			srv.Proc.Resume()
		}
	})
	err := a.Decrement(ctx, "sku", 3)
	if err := srv.Proc.Resume(); err != nil {
		t.Fatal(err)
	}
	resumed = true
	if !errors.Is(err, stockguard.ErrOutcomeUnknown) {
		t.Fatalf("Decrement on a paused server: %v, want ErrOutcomeUnknown", err)
	}
	// The outcome was unknown to the client; the server applied the script
	// once it ran again, and only once.
	n, err := a.Stock(ctx, "sku")
	if n != 6 || err != nil {
		t.Fatalf("Stock after resume = %d, %v; want 6", n, err)
	}
}

// TestAtomic_Decrement_scriptFlushed makes EVALSHA fail with NOSCRIPT: Run
// falls back to EVAL, which is sent just once as well.
func TestAtomic_Decrement_scriptFlushed(t *testing.T) {
	rdb := backendstest.PrivateRedis(t, 1)[0].Client()
	t.Cleanup(func() { rdb.Close() })
	a, err := NewAtomic(rdb)
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	if err := a.SetStock(ctx, "sku", 5); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if err := rdb.ScriptFlush(ctx).Err(); err != nil {
			t.Fatal(err)
		}
		if err := a.Decrement(ctx, "sku", 2); err != nil {
			t.Fatalf("Decrement after SCRIPT FLUSH: %v", err)
		}
	}
	if n, err := a.Stock(ctx, "sku"); n != 1 || err != nil {
		t.Fatalf("Stock = %d, %v; want 1", n, err)
	}
}

// TestAtomic_conformanceCluster runs the suite on a 3-master Redis Cluster:
// the script's one key routes by its hash tag, and Once-wrapped commands
// route like go-redis's own.
func TestAtomic_conformanceCluster(t *testing.T) {
	rdb := backendstest.PrivateCluster(t, 3).Client()
	t.Cleanup(func() { rdb.Close() })
	stocktest.Run(t, func(t *testing.T) stockguard.Inventory { return must.New(NewAtomic(rdb)) })
}
