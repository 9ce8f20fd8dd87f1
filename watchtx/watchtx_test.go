package watchtx

import (
	"context"
	"errors"
	"net"
	"sync/atomic"
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
	"github.com/stockguard/stockguard/strategy"
)

func TestInventory_conformance(t *testing.T) {
	rdb := backendstest.RedisClient(t)
	prefix := redistest.Prefix(t, rdb)
	stocktest.Run(t, func(t *testing.T) stockguard.Inventory { return must.New(New(rdb, WithPrefix(prefix))) })
}

// afterGet is a go-redis hook that calls fn after every GET of key has been
// answered — on the WATCHed connection, between the read and the EXEC.
type afterGet struct {
	key string
	fn  func(ctx context.Context)
}

func (h afterGet) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h afterGet) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

func (h afterGet) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		err := next(ctx, cmd)
		if args := cmd.Args(); cmd.Name() == "get" && len(args) == 2 && args[1] == h.key {
			h.fn(ctx)
		}
		return err
	}
}

// conflictOnce returns a client on which the first GET of sku's stock key is
// followed by another client taking 1 unit: a deterministic conflict.
func conflictOnce(t *testing.T, prefix, sku string) (*redis.Client, *atomic.Int64) {
	t.Helper()
	other := backendstest.RedisClient(t)
	rdb := backendstest.RedisClient(t)
	key := rediskeys.Keys{Prefix: prefix}.Stock(sku)
	var writes atomic.Int64
	rdb.AddHook(conflictingWrite(t, other, key, &writes))
	return rdb, &writes
}

// conflictingWrite returns a hook that, after the first GET of key, has
// other take 1 unit of it and counts that write in writes.
func conflictingWrite(t *testing.T, other redis.Cmdable, key string, writes *atomic.Int64) afterGet {
	return afterGet{key: key, fn: func(ctx context.Context) {
		if writes.CompareAndSwap(0, 1) {
			if err := other.DecrBy(ctx, key, 1).Err(); err != nil {
				t.Errorf("the conflicting write: %v", err)
			}
		}
	}}
}

// checkRetriedOnce decrements 2 of 10 units through inv, whose first
// attempt meets the one conflicting write counted in writes, and checks
// that one retry took them.
func checkRetriedOnce(t *testing.T, inv *Inventory, writes *atomic.Int64) {
	t.Helper()
	ctx := t.Context()
	if err := inv.SetStock(ctx, "sku", 10); err != nil {
		t.Fatal(err)
	}
	if err := inv.Decrement(ctx, "sku", 2); err != nil {
		t.Fatalf("Decrement with one conflict: %v", err)
	}
	if writes.Load() != 1 {
		t.Fatal("the conflicting write did not happen")
	}
	if got := inv.Retries(); got != 1 {
		t.Errorf("Retries = %d, want 1", got)
	}
	if n, err := inv.Stock(ctx, "sku"); n != 7 || err != nil {
		t.Fatalf("Stock = %d, %v; want 7 (10 - 1 by the other client - 2)", n, err)
	}
}

func TestInventory_Decrement_retriesOnConflict(t *testing.T) {
	prefix := redistest.Prefix(t, backendstest.RedisClient(t))
	rdb, writes := conflictOnce(t, prefix, "sku")
	checkRetriedOnce(t, must.New(New(rdb, WithPrefix(prefix))), writes)
}

func TestInventory_Decrement_oneAttemptGivesUp(t *testing.T) {
	prefix := redistest.Prefix(t, backendstest.RedisClient(t))
	rdb, _ := conflictOnce(t, prefix, "sku")
	inv := must.New(New(rdb, WithPrefix(prefix), WithRetry(strategy.RetryPolicy{MaxAttempts: 1})))
	ctx := t.Context()
	if err := inv.SetStock(ctx, "sku", 10); err != nil {
		t.Fatal(err)
	}
	err := inv.Decrement(ctx, "sku", 2)
	if !errors.Is(err, stockguard.ErrContention) || !errors.Is(err, redis.TxFailedErr) {
		t.Fatalf("Decrement with one attempt and a conflict: %v, want ErrContention", err)
	}
	if got := inv.Retries(); got != 0 {
		t.Errorf("Retries = %d, want 0", got)
	}
	if n, err := inv.Stock(ctx, "sku"); n != 9 || err != nil {
		t.Fatalf("Stock = %d, %v; want 9 (only the other client's unit gone)", n, err)
	}
}

// TestInventory_Decrement_checksValueReadUnderWatch lets the conflicting
// write take the stock below the request: the retry must read the new
// level and refuse, not apply a decision made on the old one.
func TestInventory_Decrement_checksValueReadUnderWatch(t *testing.T) {
	prefix := redistest.Prefix(t, backendstest.RedisClient(t))
	rdb, _ := conflictOnce(t, prefix, "sku")
	inv, err := New(rdb, WithPrefix(prefix))
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	if err := inv.SetStock(ctx, "sku", 3); err != nil {
		t.Fatal(err)
	}
	if err := inv.Decrement(ctx, "sku", 3); !errors.Is(err, stockguard.ErrInsufficientStock) {
		t.Fatalf("Decrement of 3 when the other client took 1 of 3: %v, want ErrInsufficientStock", err)
	}
	if n, err := inv.Stock(ctx, "sku"); n != 2 || err != nil {
		t.Fatalf("Stock = %d, %v; want 2", n, err)
	}
}

func TestInventory_Decrement_unknownSKUCreatesNothing(t *testing.T) {
	rdb := backendstest.RedisClient(t)
	prefix := redistest.Prefix(t, rdb)
	inv, err := New(rdb, WithPrefix(prefix))
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	if err := inv.Decrement(ctx, "ghost", 3); !errors.Is(err, stockguard.ErrUnknownSKU) {
		t.Fatalf("Decrement of an unknown sku: %v, want ErrUnknownSKU", err)
	}
	if n := rdb.Exists(ctx, rediskeys.Keys{Prefix: prefix}.Stock("ghost")).Val(); n != 0 {
		t.Fatalf("EXISTS after Decrement of an unknown sku = %d, want 0", n)
	}
}

func TestInventory_Decrement_corruptValue(t *testing.T) {
	rdb := backendstest.RedisClient(t)
	prefix := redistest.Prefix(t, rdb)
	inv, err := New(rdb, WithPrefix(prefix))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range redistest.CorruptValues {
		t.Run(c.Name, func(t *testing.T) {
			ctx := t.Context()
			key := rediskeys.Keys{Prefix: prefix}.Stock(c.Name)
			if err := c.Set(ctx, rdb, key); err != nil {
				t.Fatal(err)
			}
			before := rdb.Dump(ctx, key).Val()
			err := inv.Decrement(ctx, c.Name, 1)
			if !errors.Is(err, stockguard.ErrCorruptStock) || !errors.Is(err, stockguard.ErrUnknownSKU) {
				t.Errorf("Decrement: %v, want ErrCorruptStock and ErrUnknownSKU", err)
			}
			if _, err := inv.Stock(ctx, c.Name); !errors.Is(err, stockguard.ErrCorruptStock) {
				t.Errorf("Stock: %v, want ErrCorruptStock", err)
			}
			if after := rdb.Dump(ctx, key).Val(); after != before {
				t.Errorf("the corrupt value changed")
			}
		})
	}
}

// TestInventory_Decrement_replyLost loses the reply to EXEC after Redis ran
// it: ErrOutcomeUnknown, and the transaction applied at most once.
func TestInventory_Decrement_replyLost(t *testing.T) {
	srv := backendstest.SharedRedis(t)
	proxy := cutproxy.Start(t, srv.Addr)
	rdb := redis.NewClient(&redis.Options{Addr: proxy.Addr, MaxRetries: 3})
	t.Cleanup(func() { rdb.Close() })
	prefix := redistest.Prefix(t, backendstest.RedisClient(t))
	key := rediskeys.Keys{Prefix: prefix}.Stock("sku")
	rdb.AddHook(afterGet{key: key, fn: func(context.Context) { proxy.CutNextReply() }})
	inv, err := New(rdb, WithPrefix(prefix))
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	if err := inv.SetStock(ctx, "sku", 10); err != nil {
		t.Fatal(err)
	}
	if err := inv.Decrement(ctx, "sku", 3); !errors.Is(err, stockguard.ErrOutcomeUnknown) {
		t.Fatalf("Decrement with the EXEC reply lost: %v, want ErrOutcomeUnknown", err)
	}
	n, err := must.New(New(backendstest.RedisClient(t), WithPrefix(prefix))).Stock(ctx, "sku")
	if err != nil {
		t.Fatal(err)
	}
	if n != 7 {
		t.Fatalf("Stock = %d; want 7 (the cut proxy waits for the EXEC reply, so it was applied, once)", n)
	}
}

// TestInventory_Decrement_serverPaused stops the server (SIGSTOP) between
// the GET and the EXEC: EXEC lands in the server's socket buffer, the reply
// never comes, the client times out: ErrOutcomeUnknown.
func TestInventory_Decrement_serverPaused(t *testing.T) {
	srv := backendstest.PrivateRedis(t, 1)[0]
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr, ReadTimeout: 200 * time.Millisecond})
	t.Cleanup(func() { rdb.Close() })
	key := rediskeys.Keys{}.Stock("sku")
	var paused atomic.Bool
	rdb.AddHook(afterGet{key: key, fn: func(context.Context) {
		if err := srv.Proc.Pause(); err != nil {
			t.Error(err)
		}
		paused.Store(true)
	}})
	t.Cleanup(func() {
		if paused.Load() {
			srv.Proc.Resume()
		}
	})
	inv := must.New(New(rdb))
	ctx := t.Context()
	if err := inv.SetStock(ctx, "sku", 10); err != nil {
		t.Fatal(err)
	}
	err := inv.Decrement(ctx, "sku", 3)
	if err := srv.Proc.Resume(); err != nil {
		t.Fatal(err)
	}
	if !errors.Is(err, stockguard.ErrOutcomeUnknown) {
		t.Fatalf("Decrement with the server paused before EXEC: %v, want ErrOutcomeUnknown", err)
	}
	plain := srv.Client()
	t.Cleanup(func() { plain.Close() })
	n, err := must.New(New(plain)).Stock(ctx, "sku")
	if err != nil {
		t.Fatal(err)
	}
	if n != 10 && n != 7 {
		t.Fatalf("Stock after resume = %d; want 10 (not applied) or 7 (applied once)", n)
	}
	t.Logf("stock after resume: %d (the buffered EXEC %s)", n, map[bool]string{true: "ran", false: "was dropped"}[n == 7])
}

func TestInventory_validatesBeforeIO(t *testing.T) {
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"})
	rdb.Close()
	inv, err := New(rdb)
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	for name, err := range map[string]error{
		"Decrement empty sku": inv.Decrement(ctx, "", 1),
		"Decrement qty -1":    inv.Decrement(ctx, "x", -1),
		"SetStock too much":   inv.SetStock(ctx, "x", stockguard.MaxQty+1),
	} {
		if !errors.Is(err, stockguard.ErrInvalidRequest) {
			t.Errorf("%s: %v, want ErrInvalidRequest", name, err)
		}
	}
	if _, err := New(rdb, WithRetry(strategy.RetryPolicy{BaseDelay: -time.Millisecond})); strategy.Contract(err) != stockguard.ErrInvalidRequest {
		t.Errorf("New with a bad option: %v, want ErrInvalidRequest", err)
	}
	if err := inv.Decrement(ctx, "x", 1); strategy.Contract(err) != stockguard.ErrUnavailable {
		t.Errorf("Decrement on a closed client: %v, want ErrUnavailable", err)
	}
}

// Nothing listens on the port: every call is ErrUnavailable, never
// ErrContention ("busy, try again").
func TestInventory_unreachable(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	// No retries: the answer is the same, sooner.
	rdb := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1, DialerRetries: 1})
	t.Cleanup(func() { rdb.Close() })
	inv, err := New(rdb)
	if err != nil {
		t.Fatal(err)
	}
	_, stockErr := inv.Stock(t.Context(), "x")
	for name, err := range map[string]error{
		"Decrement": inv.Decrement(t.Context(), "x", 1),
		"SetStock":  inv.SetStock(t.Context(), "x", 1),
		"Stock":     stockErr,
	} {
		if strategy.Contract(err) != stockguard.ErrUnavailable {
			t.Errorf("%s: %v, want ErrUnavailable", name, err)
		}
	}
}

// A read-only replica refuses the writes (READONLY): ErrUnavailable,
// nothing applied; reads are served.
func TestInventory_readOnlyReplica(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	host, port, _ := net.SplitHostPort(l.Addr().String())
	l.Close()
	// A replica of a master that does not exist serves its (empty) data
	// stale and refuses writes.
	srv := backendstest.PrivateRedis(t, 1, "--replicaof", host, port)[0]
	rdb := srv.Client()
	t.Cleanup(func() { rdb.Close() })
	inv, err := New(rdb)
	if err != nil {
		t.Fatal(err)
	}
	if err := inv.SetStock(t.Context(), "x", 5); strategy.Contract(err) != stockguard.ErrUnavailable {
		t.Errorf("SetStock on a replica: %v, want ErrUnavailable", err)
	}
	if _, err := inv.Stock(t.Context(), "x"); strategy.Contract(err) != stockguard.ErrUnknownSKU {
		t.Errorf("Stock on a replica: %v, want ErrUnknownSKU (read served)", err)
	}
}

// TestInventory_conformanceCluster runs the suite on a 3-master Redis
// Cluster: WATCH and the transaction go to the node of the key's slot.
func TestInventory_conformanceCluster(t *testing.T) {
	rdb := backendstest.PrivateCluster(t, 3).Client()
	t.Cleanup(func() { rdb.Close() })
	stocktest.Run(t, func(t *testing.T) stockguard.Inventory { return must.New(New(rdb)) })
}
