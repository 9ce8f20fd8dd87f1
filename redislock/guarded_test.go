package redislock

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/redis/go-redis/v9"
	"github.com/stockguard/stockguard"
	"github.com/stockguard/stockguard/internal/backends/backendstest"
	"github.com/stockguard/stockguard/internal/must"
	"github.com/stockguard/stockguard/internal/redistest"
	"github.com/stockguard/stockguard/mysqllock"
	"github.com/stockguard/stockguard/stocktest"
	"github.com/stockguard/stockguard/strategy"
)

func TestGuarded_conformance(t *testing.T) {
	rdb := backendstest.RedisClient(t)
	prefix := lockPrefix(t)
	stocktest.Run(t, func(t *testing.T) stockguard.Inventory {
		return must.New(NewGuarded(rdb, WithPrefix(prefix)))
	})
}

// fencedTable creates a stock table of its own for t and drops it at the end.
func fencedTable(t testing.TB, db *sqlx.DB) string {
	t.Helper()
	table := fmt.Sprintf("guarded_%08x", rand.Uint32())
	if err := mysqllock.CreateSchema(context.Background(), db, mysqllock.WithTable(table)); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Exec("DROP TABLE " + table) })
	return table
}

func TestGuarded_conformance_mysqlFencedStore(t *testing.T) {
	rdb := backendstest.RedisClient(t)
	db := backendstest.DB(t)
	table := fencedTable(t, db)
	prefix := lockPrefix(t)
	stocktest.Run(t, func(t *testing.T) stockguard.Inventory {
		return must.New(NewGuarded(rdb, WithPrefix(prefix), WithStore(must.New(mysqllock.NewFencedStore(db, mysqllock.WithTable(table))))))
	})
}

func TestGuarded_busyLockIsContention(t *testing.T) {
	rdb := backendstest.RedisClient(t)
	prefix := lockPrefix(t)
	ctx := t.Context()
	g, err := NewGuarded(rdb, WithPrefix(prefix), WithRetry(strategy.RetryPolicy{MaxAttempts: 3}))
	if err != nil {
		t.Fatal(err)
	}
	if err := g.SetStock(ctx, "sku", 10); err != nil {
		t.Fatal(err)
	}
	held, err := must.New(New(rdb, WithPrefix(prefix))).Obtain(ctx, "sku", 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer held.Release(ctx)
	if err := g.Decrement(ctx, "sku", 1); !errors.Is(err, stockguard.ErrContention) {
		t.Fatalf("Decrement under a held lock = %v, want ErrContention", err)
	}
	if err := g.SetStock(ctx, "sku", 5); !errors.Is(err, stockguard.ErrContention) {
		t.Fatalf("SetStock under a held lock = %v, want ErrContention", err)
	}
	if n := g.Retries(); n != 4 {
		t.Fatalf("Retries = %d, want 2 per request", n)
	}
	if n, err := g.Stock(ctx, "sku"); err != nil || n != 10 {
		t.Fatalf("Stock = %d, %v; want 10 untouched", n, err)
	}
}

// stealingStore takes the SKU's lock away (as an expired lease followed by
// another holder would) just before the first writes.
type stealingStore struct {
	Store
	steals atomic.Int64
	steal  func(ctx context.Context, sku string) error
}

func (s *stealingStore) WriteFenced(ctx context.Context, sku string, qty, token int64) error {
	if s.steals.Add(-1) >= 0 {
		if err := s.steal(ctx, sku); err != nil {
			return err
		}
	}
	return s.Store.WriteFenced(ctx, sku, qty, token)
}

func TestGuarded_lockLostBeforeWriteIsRefused(t *testing.T) {
	rdb := backendstest.RedisClient(t)
	prefix := lockPrefix(t)
	ctx := t.Context()
	thief, err := New(rdb, WithPrefix(prefix))
	if err != nil {
		t.Fatal(err)
	}
	store := &stealingStore{Store: must.New(NewRedisStore(rdb, WithPrefix(prefix))), steal: func(ctx context.Context, sku string) error {
		rdb.Del(ctx, thief.LockKey(sku)) // the lease "ran out"
		l, err := thief.Obtain(ctx, sku, time.Second)
		if err != nil {
			return err
		}
		return l.Release(ctx)
	}}
	for _, tc := range []struct {
		attempts int
		want     error
		left     int64
	}{
		{1, stockguard.ErrContention, 10}, // refused, given up: nothing written
		{2, nil, 9},                       // refused, retried: written once
	} {
		g := must.New(NewGuarded(rdb, WithPrefix(prefix), WithStore(store), WithRetry(strategy.RetryPolicy{MaxAttempts: tc.attempts})))
		if err := g.SetStock(ctx, "sku", 10); err != nil {
			t.Fatal(err)
		}
		store.steals.Store(1)
		err := g.Decrement(ctx, "sku", 1)
		if !errors.Is(err, tc.want) {
			t.Fatalf("attempts %d: Decrement = %v, want %v", tc.attempts, err, tc.want)
		}
		if tc.want != nil && !errors.Is(err, stockguard.ErrFenced) {
			t.Fatalf("attempts %d: Decrement = %v, want it to say the write was fenced off", tc.attempts, err)
		}
		if n, err := g.Stock(ctx, "sku"); err != nil || n != tc.left {
			t.Fatalf("attempts %d: Stock = %d, %v; want %d", tc.attempts, n, err, tc.left)
		}
	}
}

// TestGuarded_fencedOffIsErrFenced lets a thief take the lock and write
// between a request's read and its write, with each store: the request's
// write is refused, and given up it is ErrContention matching
// stockguard.ErrFenced whatever the
// store.
func TestGuarded_fencedOffIsErrFenced(t *testing.T) {
	rdb := backendstest.RedisClient(t)
	stores := map[string]func(t *testing.T, prefix string) Store{
		"redis": func(_ *testing.T, prefix string) Store { return must.New(NewRedisStore(rdb, WithPrefix(prefix))) },
		"mysql": func(t *testing.T, _ string) Store {
			db := backendstest.DB(t)
			return must.New(mysqllock.NewFencedStore(db, mysqllock.WithTable(fencedTable(t, db))))
		},
	}
	for name, newStore := range stores {
		t.Run(name, func(t *testing.T) {
			ctx := t.Context()
			prefix := redistest.Prefix(t, rdb)
			base := newStore(t, prefix)
			thief := must.New(New(rdb, WithPrefix(prefix)))
			store := &stealingStore{Store: base, steal: func(ctx context.Context, sku string) error {
				rdb.Del(ctx, thief.LockKey(sku)) // the lease "ran out"
				l, err := thief.Obtain(ctx, sku, time.Second)
				if err != nil {
					return err
				}
				defer l.Release(ctx)
				n, err := base.Stock(ctx, sku)
				if err != nil {
					return err
				}
				return base.WriteFenced(ctx, sku, n, l.Token())
			}}
			g := must.New(NewGuarded(rdb, WithPrefix(prefix), WithStore(store), WithRetry(strategy.RetryPolicy{MaxAttempts: 1})))
			if err := g.SetStock(ctx, "sku", 10); err != nil {
				t.Fatal(err)
			}
			store.steals.Store(1)
			err := g.Decrement(ctx, "sku", 1)
			if !errors.Is(err, stockguard.ErrFenced) || strategy.Contract(err) != stockguard.ErrContention {
				t.Fatalf("Decrement fenced off: %v, want ErrContention matching stockguard.ErrFenced", err)
			}
			if n, err := g.Stock(ctx, "sku"); n != 10 || err != nil {
				t.Fatalf("Stock = %d, %v; want 10 (nothing written)", n, err)
			}
		})
	}
}

// replyCutter applies the fenced write, then loses its reply.
type replyCutter struct{ cut atomic.Bool }

func (h *replyCutter) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *replyCutter) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		err := next(ctx, cmd)
		// Only a write that ran loses its reply: an EVALSHA answered
		// NOSCRIPT ran nothing, and go-redis sends the script again.
		if a := cmd.Args(); err == nil && len(a) > 1 && a[1] == guardedWriteScript.Hash() && h.cut.Load() {
			err = &net.OpError{Op: "read", Net: "tcp", Err: os.ErrDeadlineExceeded}
			cmd.SetErr(err)
		}
		return err
	}
}

func (h *replyCutter) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

func TestGuarded_lostWriteReplyIsOutcomeUnknown(t *testing.T) {
	rdb := backendstest.SharedRedis(t).Client()
	t.Cleanup(func() { rdb.Close() })
	hook := &replyCutter{}
	rdb.AddHook(hook)
	ctx := t.Context()
	g := must.New(NewGuarded(rdb, WithPrefix(lockPrefix(t))))
	if err := g.SetStock(ctx, "sku", 10); err != nil {
		t.Fatal(err)
	}
	// Loaded, so that the write is one EVALSHA that runs, whatever ran
	// on the shared server before (a fresh one, a SCRIPT FLUSH).
	if err := guardedWriteScript.Load(ctx, rdb).Err(); err != nil {
		t.Fatal(err)
	}
	hook.cut.Store(true)
	err := g.Decrement(ctx, "sku", 3)
	hook.cut.Store(false)
	if !errors.Is(err, stockguard.ErrOutcomeUnknown) {
		t.Fatalf("Decrement with a lost reply = %v, want ErrOutcomeUnknown", err)
	}
	if n, err := g.Stock(ctx, "sku"); err != nil || n != 7 {
		t.Fatalf("Stock = %d, %v; want 7: the write was applied once, not resent", n, err)
	}
	if rdb.Exists(ctx, g.locks.(fencedLocks).c.LockKey("sku")).Val() != 0 {
		t.Fatal("lock left behind after an unknown outcome")
	}
}

func TestRedisStore_WriteFenced(t *testing.T) {
	rdb := backendstest.RedisClient(t)
	prefix := lockPrefix(t)
	ctx := t.Context()
	c, s := must.New(New(rdb, WithPrefix(prefix))), must.New(NewRedisStore(rdb, WithPrefix(prefix)))
	if err := s.SetStock(ctx, "sku", 10); err != nil {
		t.Fatal(err)
	}
	first, err := c.Obtain(ctx, "sku", time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.WriteFenced(ctx, "sku", 9, first.Token()); err != nil {
		t.Fatal(err)
	}
	first.Release(ctx)
	second, err := c.Obtain(ctx, "sku", time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer second.Release(ctx)
	err = s.WriteFenced(ctx, "sku", 1, first.Token())
	if !errors.Is(err, stockguard.ErrFenced) || !errors.Is(err, stockguard.ErrContention) {
		t.Fatalf("stale token's write = %v, want ErrFenced (ErrContention)", err)
	}
	if err := s.WriteFenced(ctx, "sku", 8, second.Token()); err != nil {
		t.Fatal(err)
	}
	if n, err := s.Stock(ctx, "sku"); err != nil || n != 8 {
		t.Fatalf("Stock = %d, %v; want 8", n, err)
	}
	if err := s.WriteFenced(ctx, "sku", 8, 0); !errors.Is(err, stockguard.ErrInvalidRequest) {
		t.Fatalf("token 0 = %v, want ErrInvalidRequest", err)
	}
	fresh, err := c.Obtain(ctx, "nostock", time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer fresh.Release(ctx)
	if err := s.WriteFenced(ctx, "nostock", 1, fresh.Token()); !errors.Is(err, stockguard.ErrUnknownSKU) {
		t.Fatalf("write to an unstocked SKU = %v, want ErrUnknownSKU", err)
	}
	if rdb.Exists(ctx, s.levels.Keys.Stock("nostock")).Val() != 0 {
		t.Fatal("a refused write created the stock key")
	}
}

// brokenStore fails every read with an error outside the contract, as a
// store whose database went away would.
type brokenStore struct{ Store }

func (brokenStore) Stock(context.Context, string) (int64, error) {
	return 0, errors.New("connection refused")
}

// A store that cannot be read is ErrUnavailable, never ErrContention: the
// caller must not be told that trying again soon helps.
func TestGuarded_storeReadFailureIsUnavailable(t *testing.T) {
	rdb := backendstest.RedisClient(t)
	prefix := lockPrefix(t)
	ctx := t.Context()
	g, err := NewGuarded(rdb, WithPrefix(prefix), WithStore(brokenStore{must.New(NewRedisStore(rdb, WithPrefix(prefix)))}))
	if err != nil {
		t.Fatal(err)
	}
	if err := g.SetStock(ctx, "sku", 10); err != nil {
		t.Fatal(err)
	}
	_, stockErr := g.Stock(ctx, "sku")
	for what, err := range map[string]error{"Stock": stockErr, "Decrement": g.Decrement(ctx, "sku", 1)} {
		if c := strategy.Contract(err); c != stockguard.ErrUnavailable {
			t.Errorf("%s = %v, want exactly ErrUnavailable", what, err)
		}
	}
}
