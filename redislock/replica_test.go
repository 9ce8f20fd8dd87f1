package redislock

import (
	"context"
	"crypto/rand"
	"errors"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stockguard/stockguard"
	"github.com/stockguard/stockguard/internal/backends"
	"github.com/stockguard/stockguard/internal/backends/backendstest"
	"github.com/stockguard/stockguard/internal/must"
	"github.com/stockguard/stockguard/internal/redistest"
	"github.com/stockguard/stockguard/redislock/lock"
	"github.com/stockguard/stockguard/stocktest"
	"github.com/stockguard/stockguard/strategy"
)

// ackWriter is a writer of this package under test with WithReplicaAck.
type ackWriter struct {
	name string
	// build returns the writer over rdb with opts (prefix and ack).
	build func(rdb redis.UniversalClient, opts ...Option) stockguard.Inventory
	// level reads sku's units straight from a server (a replica), as the
	// writer keeps them.
	level func(ctx context.Context, srv *redis.Client, prefix, sku string) (int64, error)
	// applied: a take whose WAIT falls short was applied on the master
	// (not so for Guarded, whose lock is refused first).
	applied bool
}

// takeOrders is an Orders taking through Take, one order per request.
type takeOrders struct{ stockguard.Orders }

func (o takeOrders) Decrement(ctx context.Context, sku string, qty int64) error {
	return o.Take(ctx, "o-"+rand.Text()[:12], stockguard.Line{SKU: sku, Qty: qty})
}

func stockKeyLevel(ctx context.Context, srv *redis.Client, prefix, sku string) (int64, error) {
	v, err := srv.Get(ctx, prefix+"stock:{"+sku+"}").Result()
	if err != nil {
		return 0, err
	}
	return strconv.ParseInt(v, 10, 64)
}

var ackWriters = []ackWriter{
	{"atomic", func(rdb redis.UniversalClient, opts ...Option) stockguard.Inventory {
		return must.New(NewAtomic(rdb, opts...))
	}, stockKeyLevel, true},
	{"batched", func(rdb redis.UniversalClient, opts ...Option) stockguard.Inventory {
		return must.New(NewBatched(rdb, opts...))
	}, stockKeyLevel, true},
	{"orders", func(rdb redis.UniversalClient, opts ...Option) stockguard.Inventory {
		return takeOrders{must.New(NewAtomic(rdb, opts...))}
	}, stockKeyLevel, true},
	{"batchedOrders", func(rdb redis.UniversalClient, opts ...Option) stockguard.Inventory {
		return takeOrders{must.New(NewBatched(rdb, opts...))}
	}, stockKeyLevel, true},
	{"segmented", func(rdb redis.UniversalClient, opts ...Option) stockguard.Inventory {
		return must.New(NewSegmented(rdb, append(opts, WithSegments(4))...))
	}, func(ctx context.Context, srv *redis.Client, prefix, sku string) (int64, error) {
		return must.New(NewSegmented(srv, WithPrefix(prefix), WithSegments(4))).RawStock(ctx, sku)
	}, true},
	{"guarded", func(rdb redis.UniversalClient, opts ...Option) stockguard.Inventory {
		return must.New(NewGuarded(rdb, opts...))
	}, stockKeyLevel, false},
}

// TestReplicaAck_conformance runs the conformance suites with every write
// acknowledged by the replica.
func TestReplicaAck_conformance(t *testing.T) {
	r := backendstest.SharedReplicated(t)
	rdb := r.Client()
	t.Cleanup(func() { rdb.Close() })
	ack := WithReplicaAck(1, 2*time.Second)
	for _, w := range ackWriters[:2] {
		t.Run(w.name, func(t *testing.T) {
			prefix := redistest.Prefix(t, rdb)
			stocktest.Run(t, func(t *testing.T) stockguard.Inventory { return w.build(rdb, WithPrefix(prefix), ack) })
		})
	}
	t.Run("segmented", func(t *testing.T) {
		prefix := redistest.Prefix(t, rdb)
		stocktest.Suite{StockNotLinearizable: true}.Run(t, func(t *testing.T) stockguard.Inventory {
			return must.New(NewSegmented(rdb, WithPrefix(prefix), ack))
		})
	})
	t.Run("orders", func(t *testing.T) {
		prefix := redistest.Prefix(t, rdb)
		stocktest.RunOrders(t, func(t *testing.T) stockguard.Orders { return must.New(NewAtomic(rdb, WithPrefix(prefix), ack)) })
	})
	t.Run("batchedOrders", func(t *testing.T) {
		prefix := redistest.Prefix(t, rdb)
		stocktest.RunOrders(t, func(t *testing.T) stockguard.Orders { return must.New(NewBatched(rdb, WithPrefix(prefix), ack)) })
	})
}

// TestReplicaAck_ackedTakeIsOnReplica has writers take concurrently; each
// time a take is acknowledged, the replica, read at once, must already
// miss every unit acknowledged so far. The replica lags 20ms behind the
// master, so without the ack a replica read right after an acknowledged
// take still shows the units (and the lock's fence is behind its token).
func TestReplicaAck_ackedTakeIsOnReplica(t *testing.T) {
	r := laggingReplicated(t, 20*time.Millisecond)
	rdb := r.Client()
	t.Cleanup(func() { rdb.Close() })
	replica := r.Replicas[0].Client()
	t.Cleanup(func() { replica.Close() })
	const (
		initial = 1000
		workers = 8
		takes   = 10
	)
	for _, w := range ackWriters {
		t.Run(w.name, func(t *testing.T) {
			ctx := t.Context()
			prefix := redistest.Prefix(t, rdb)
			inv := w.build(rdb, WithPrefix(prefix), WithReplicaAck(1, 5*time.Second))
			sku := "sku"
			if err := inv.SetStock(ctx, sku, initial); err != nil {
				t.Fatal(err)
			}
			var acked atomic.Int64
			var wg sync.WaitGroup
			for range workers {
				wg.Go(func() {
					for range takes {
						err := inv.Decrement(ctx, sku, 1)
						if errors.Is(err, stockguard.ErrContention) && w.name == "guarded" {
							continue // a lock busy with another worker; nothing taken
						}
						if err != nil {
							t.Errorf("Decrement: %v", err)
							return
						}
						sure := acked.Add(1)
						got, err := w.level(ctx, replica, prefix, sku)
						if err != nil {
							t.Errorf("replica read: %v", err)
							return
						}
						if got > initial-sure {
							t.Errorf("replica has %d units right after the ack, want at most %d", got, initial-sure)
							return
						}
					}
				})
			}
			wg.Wait()
			if got, err := inv.Stock(ctx, sku); err != nil || got != initial-acked.Load() {
				t.Errorf("master: %d, %v; want %d", got, err, initial-acked.Load())
			}
		})
	}
	t.Run("lock", func(t *testing.T) {
		ctx := t.Context()
		prefix := redistest.Prefix(t, rdb)
		c, err := lock.New(rdb, lock.WithPrefix(prefix), lock.WithReplicaAck(1, 5*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		for i := range workers {
			wg.Go(func() {
				key := "k" + strconv.Itoa(i%2)
				for range takes / 2 {
					l, err := c.Obtain(ctx, key, time.Second, lock.ObtainRetry(stockguard.RetryPolicy{MaxAttempts: 1 << 20, BaseDelay: time.Millisecond, MaxDelay: time.Millisecond}))
					if err != nil {
						t.Errorf("Obtain: %v", err)
						return
					}
					fence, err := replica.Get(ctx, c.FenceKey(key)).Int64()
					if err != nil || fence < l.Token() {
						t.Errorf("replica's fence %d (%v) below the token %d just handed out", fence, err, l.Token())
					}
					if err := l.Release(ctx); err != nil {
						t.Errorf("Release: %v", err)
					}
					// Another worker may hold it by now: only ours must be gone.
					if v, _ := replica.Get(ctx, c.LockKey(key)).Result(); v == l.OwnerToken() {
						t.Errorf("replica still has the released lock")
					}
				}
			})
		}
		wg.Wait()
	})
}

// TestReplicaAck_pausedReplica pauses the only replica: every write is
// applied on the master, but none can be acknowledged, so each returns
// ErrOutcomeUnknown within about the timeout — never nil, never
// ErrContention. After the replica resumes, the master and the replica
// agree, and the units gone are exactly those of the unknown outcomes.
func TestReplicaAck_pausedReplica(t *testing.T) {
	r := backendstest.PrivateReplicated(t, 1)
	rdb := r.Client()
	t.Cleanup(func() { rdb.Close() })
	replica := r.Replicas[0].Client()
	t.Cleanup(func() { replica.Close() })
	const (
		initial = 100
		timeout = 200 * time.Millisecond
		workers = 4
	)
	ctx := t.Context()
	prefix := "paused:"
	invs := make([]stockguard.Inventory, len(ackWriters))
	for i, w := range ackWriters {
		opts := []Option{WithPrefix(prefix + w.name + ":")}
		if w.name == "segmented" || w.name == "guarded" {
			// The lock-guarded writers give up at once on a busy lock.
			opts = append(opts, WithRetry(strategy.RetryPolicy{MaxAttempts: 1}))
		}
		if err := w.build(rdb, append(opts, WithReplicaAck(1, 5*time.Second))...).SetStock(ctx, "sku", initial); err != nil {
			t.Fatal(err)
		}
		invs[i] = w.build(rdb, append(opts, WithReplicaAck(1, timeout))...)
	}
	l, err := must.New(lock.New(rdb, lock.WithPrefix(prefix+"lock:"), lock.WithReplicaAck(1, 5*time.Second))).Obtain(ctx, "k", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
	before := l.Token()
	locks, err := lock.New(rdb, lock.WithPrefix(prefix+"lock:"), lock.WithReplicaAck(1, timeout))
	if err != nil {
		t.Fatal(err)
	}

	if err := r.Replicas[0].Proc.Pause(); err != nil {
		t.Fatal(err)
	}
	resumed := false
	resume := func() {
		if !resumed {
			resumed = true
			if err := r.Replicas[0].Proc.Resume(); err != nil {
				t.Fatal(err)
			}
		}
	}
	t.Cleanup(resume)

	unknown := make([]atomic.Int64, len(ackWriters))
	var wg sync.WaitGroup
	for i, inv := range invs {
		for range workers {
			wg.Go(func() {
				start := time.Now()
				err := inv.Decrement(ctx, "sku", 1)
				took := time.Since(start)
				if !errors.Is(err, stockguard.ErrOutcomeUnknown) {
					t.Errorf("%s: Decrement with the replica paused: %v, want ErrOutcomeUnknown", ackWriters[i].name, err)
					return
				}
				unknown[i].Add(1)
				if took > timeout+3*time.Second {
					t.Errorf("%s: took %v, the ack timeout is %v", ackWriters[i].name, took, timeout)
				}
			})
		}
	}
	wg.Go(func() {
		_, err := locks.Obtain(ctx, "k", time.Minute)
		if !errors.Is(err, stockguard.ErrOutcomeUnknown) {
			t.Errorf("Obtain with the replica paused: %v, want ErrOutcomeUnknown", err)
		}
	})
	wg.Go(func() {
		_, err := locks.Obtain(ctx, "r", time.Minute, lock.Reentrant(lock.NewOwner()))
		if !errors.Is(err, stockguard.ErrOutcomeUnknown) {
			t.Errorf("reentrant Obtain with the replica paused: %v, want ErrOutcomeUnknown", err)
		}
	})
	wg.Wait()
	// The unconfirmed locks were released again on the master: not wedged.
	for _, k := range []string{"k", "r"} {
		if n, err := rdb.Exists(ctx, locks.LockKey(k)).Result(); err != nil || n != 0 {
			t.Errorf("lock key %q after an unconfirmed Obtain: exists %d, %v", k, n, err)
		}
	}

	resume()
	if err := r.WaitSynced(ctx); err != nil {
		t.Fatal(err)
	}
	if err := rdb.Wait(ctx, 1, 5*time.Second).Err(); err != nil {
		t.Fatal(err)
	}
	for i, w := range ackWriters {
		p := prefix + w.name + ":"
		onMaster, err := w.level(ctx, rdb, p, "sku")
		if err != nil {
			t.Fatal(err)
		}
		onReplica, err := w.level(ctx, replica, p, "sku")
		if err != nil {
			t.Fatal(err)
		}
		gone, maybe := initial-onMaster, unknown[i].Load()
		switch {
		case onReplica != onMaster:
			t.Errorf("%s: replica %d, master %d after resync", w.name, onReplica, onMaster)
		case w.applied && gone != maybe:
			t.Errorf("%s: %d units gone, %d takes were applied with their ack unknown", w.name, gone, maybe)
		case gone < 0 || gone > maybe:
			t.Errorf("%s: %d units gone, only %d outcomes unknown", w.name, gone, maybe)
		}
		if err := invs[i].Decrement(ctx, "sku", 1); err != nil {
			t.Errorf("%s: Decrement after resume: %v", w.name, err)
		}
	}
	l, err = locks.Obtain(ctx, "k", time.Minute)
	if err != nil {
		t.Fatalf("Obtain after resume: %v", err)
	}
	if l.Token() <= before {
		t.Errorf("token %d after resume, not above %d", l.Token(), before)
	}
}

// TestReplicaAck_clusterWaitsOnTheWritesNode pauses the replica of one
// master of a cluster: writes to keys of the other masters are still
// acknowledged (their WAIT goes to their own master, not to a random
// node), writes to keys of that master are not.
func TestReplicaAck_clusterWaitsOnTheWritesNode(t *testing.T) {
	c := backendstest.PrivateCluster(t, 3, backends.WithClusterReplicas(1))
	rdb := c.Client()
	t.Cleanup(func() { rdb.Close() })
	ctx := t.Context()
	// Find a SKU on master 0 and one on master 1.
	skuOn := map[int]string{}
	for i := 0; len(skuOn) < 2; i++ {
		sku := "s" + strconv.Itoa(i)
		node, err := rdb.MasterForKey(ctx, "stock:{"+sku+"}")
		if err != nil {
			t.Fatal(err)
		}
		for m := range 2 {
			if _, ok := skuOn[m]; !ok && node.Options().Addr == c.Nodes[m].Addr {
				skuOn[m] = sku
			}
		}
	}
	a := must.New(NewAtomic(rdb, WithReplicaAck(1, 300*time.Millisecond)))
	for _, sku := range skuOn {
		if err := a.SetStock(ctx, sku, 100); err != nil {
			t.Fatal(err)
		}
	}
	// An order across both masters runs the two-phase protocol, every
	// phase acknowledged on its own master.
	both := []stockguard.Line{{SKU: skuOn[0], Qty: 1}, {SKU: skuOn[1], Qty: 1}}
	err := a.Take(ctx, "o-both", both...)
	if err != nil {
		t.Fatalf("two-master order with both replicas running: %v", err)
	}
	paused := c.Replicas[1][0].Proc
	if err := paused.Pause(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { paused.Resume() })
	for i := range 10 {
		if err := a.Decrement(ctx, skuOn[0], 1); err != nil {
			t.Fatalf("take %d on the master whose replica runs: %v", i, err)
		}
	}
	if err := a.Decrement(ctx, skuOn[1], 1); !errors.Is(err, stockguard.ErrOutcomeUnknown) {
		t.Fatalf("take on the master whose replica is paused: %v, want ErrOutcomeUnknown", err)
	}
	err = a.Take(ctx, "o-paused", both...)
	if err == nil || errors.Is(err, stockguard.ErrContention) {
		t.Fatalf("two-master order with one replica paused: %v, want an error other than ErrContention", err)
	}
	t.Logf("two-master order with one replica paused: %v", err)
	if err := paused.Resume(); err != nil {
		t.Fatal(err)
	}
	// Patient enough for the resumed replica to catch up on a loaded machine.
	if err := must.New(NewAtomic(rdb, WithReplicaAck(1, 5*time.Second))).Take(ctx, "o-after", both...); err != nil {
		t.Fatalf("two-master order after the replica resumed: %v", err)
	}
}

// TestReplicaAck_badOptions: every constructor refuses an invalid ack with
// ErrInvalidRequest, before any I/O.
func TestReplicaAck_badOptions(t *testing.T) {
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"})
	rdb.Close()
	for _, tc := range []struct {
		name string
		opts []Option
	}{
		{"zero replicas", []Option{WithReplicaAck(0, time.Second)}},
		{"negative replicas", []Option{WithReplicaAck(-1, time.Second)}},
		{"absurd replicas", []Option{WithReplicaAck(1000, time.Second)}},
		{"zero timeout", []Option{WithReplicaAck(1, 0)}},
		{"negative timeout", []Option{WithReplicaAck(1, -time.Second)}},
		{"sub-millisecond timeout", []Option{WithReplicaAck(1, 1500*time.Microsecond)}},
		{"absurd timeout", []Option{WithReplicaAck(1, time.Hour)}},
		{"nothing at all", []Option{WithReplicaAck(0, 0)}},
		{"aof local 2", []Option{WithAOFAck(2, 0, time.Second)}},
		{"aof nothing", []Option{WithAOFAck(0, 0, time.Second)}},
		{"aof negative replicas", []Option{WithAOFAck(1, -1, time.Second)}},
		{"both", []Option{WithReplicaAck(1, time.Second), WithAOFAck(1, 1, time.Second)}},
		{"twice", []Option{WithReplicaAck(1, time.Second), WithReplicaAck(2, time.Second)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for name, build := range map[string]func() (any, error){
				"NewAtomic":     func() (any, error) { return NewAtomic(rdb, tc.opts...) },
				"NewBatched":    func() (any, error) { return NewBatched(rdb, tc.opts...) },
				"NewSegmented":  func() (any, error) { return NewSegmented(rdb, tc.opts...) },
				"NewGuarded":    func() (any, error) { return NewGuarded(rdb, tc.opts...) },
				"New":           func() (any, error) { return New(rdb, tc.opts...) },
				"NewRedisStore": func() (any, error) { return NewRedisStore(rdb, tc.opts...) },
			} {
				if _, err := build(); !errors.Is(err, stockguard.ErrInvalidRequest) {
					t.Errorf("%s: %v, want ErrInvalidRequest", name, err)
				}
			}
		})
	}
}

// TestAOFAck_unsupportedServer: WAITAOF on a server without it (Redis 7.0)
// is ErrUnavailable before anything is written.
func TestAOFAck_unsupportedServer(t *testing.T) {
	rdb := backendstest.RedisClient(t)
	ctx := t.Context()
	if v, err := rdb.Do(ctx, "command", "info", "waitaof").Slice(); err != nil || len(v) > 0 && v[0] != nil {
		t.Skipf("this server has WAITAOF (or said %v)", err)
	}
	prefix := redistest.Prefix(t, rdb)
	plain, err := NewAtomic(rdb, WithPrefix(prefix))
	if err != nil {
		t.Fatal(err)
	}
	if err := plain.SetStock(ctx, "sku", 5); err != nil {
		t.Fatal(err)
	}
	a, err := NewAtomic(rdb, WithPrefix(prefix), WithAOFAck(0, 1, time.Second))
	if err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if err := a.Decrement(ctx, "sku", 1); !errors.Is(err, stockguard.ErrUnavailable) {
			t.Fatalf("Decrement with WAITAOF on a server without it: %v, want ErrUnavailable", err)
		}
	}
	if got, err := plain.Stock(ctx, "sku"); err != nil || got != 5 {
		t.Fatalf("stock %d, %v after refused decrements, want 5", got, err)
	}
}

// TestAOFAck_valkey: on Valkey with appendonly, WAITAOF 1 1 confirms a take
// fsynced on the master and the replica.
func TestAOFAck_valkey(t *testing.T) {
	backendstest.SkipShort(t)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	r, err := backends.StartLocalValkeyReplicated(ctx, 1, "--appendonly", "yes")
	if err != nil {
		backendstest.Unavailable(t, backends.Unavailable("private replicated valkey", err))
	}
	t.Cleanup(func() { r.Close() })
	rdb := r.Client()
	t.Cleanup(func() { rdb.Close() })
	a, err := NewAtomic(rdb, WithAOFAck(1, 1, 2*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if err := a.SetStock(ctx, "sku", 5); err != nil {
		t.Fatal(err)
	}
	if err := a.Decrement(ctx, "sku", 2); err != nil {
		t.Fatal(err)
	}
	if err := r.Replicas[0].Proc.Pause(); err != nil {
		t.Fatal(err)
	}
	defer r.Replicas[0].Proc.Resume()
	if err := a.Decrement(ctx, "sku", 1); !errors.Is(err, stockguard.ErrOutcomeUnknown) {
		t.Fatalf("Decrement with the replica paused: %v, want ErrOutcomeUnknown", err)
	}
}
