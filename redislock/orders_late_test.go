package redislock

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stockguard/stockguard"
	"github.com/stockguard/stockguard/internal/backends/backendstest"
	"github.com/stockguard/stockguard/internal/netgate"
	"github.com/stockguard/stockguard/internal/redistest"
)

// late is a first attempt's client, whose connections pass a gate, and a
// repeat's client, on the same keys.
type late struct {
	gate   *netgate.Gate
	name   string                // the gated client's connection name
	gated  redis.UniversalClient // the first attempt's client
	plain  redis.UniversalClient // the repeat's client
	first  *Atomic
	repeat *Atomic
}

// gatedOptions are a client's options that send through gate under name,
// one connection per server, and give up on a reply after a second: a
// held write then ends its call as a timeout ends it.
func gatedOptions(gate *netgate.Gate, name string) (redis.Options, redis.ClusterOptions) {
	return redis.Options{Dialer: gate.Dial, ClientName: name, PoolSize: 1, ReadTimeout: time.Second},
		redis.ClusterOptions{Dialer: gate.Dial, ClientName: name, PoolSize: 1, ReadTimeout: time.Second}
}

// newLate returns first and repeat Atomics under one prefix, first's
// connections through a gate; twoPhase as in orderModes.
func newLate(t *testing.T, plain redis.UniversalClient, gated redis.UniversalClient, gate *netgate.Gate, name string, twoPhase bool, opts ...Option) late {
	t.Cleanup(func() { gated.Close() })
	prefix := redistest.Prefix(t, plain)
	return late{gate: gate, name: name, gated: gated, plain: plain,
		first: newOrders(gated, prefix, twoPhase, opts...), repeat: newOrders(plain, prefix, twoPhase, opts...)}
}

// newGatedLate is newLate on the shared Redis, first's client through a
// new gate under name, with the scripts loaded and the gated connection
// opened by an order on the SKU "warm".
func newGatedLate(t *testing.T, name string, twoPhase bool, opts ...Option) late {
	t.Helper()
	gate := netgate.New(t)
	opt, _ := gatedOptions(gate, name)
	opt.Addr = backendstest.SharedRedis(t).Addr
	l := newLate(t, backendstest.RedisClient(t), redis.NewClient(&opt), gate, name, twoPhase, opts...)
	stockAll(t, l.repeat, 1, "warm")
	if err := l.first.Take(t.Context(), "warm", line("warm", 1)); err != nil {
		t.Fatal(err)
	}
	return l
}

// holdTake shuts the gate right before first sends the take of the line
// of sku of the two-phase order id.
func (l late) holdTake(sku, id string) {
	key := []byte(l.first.lineKey(sku, id))
	l.gate.HoldWhen(func(p []byte) bool { return bytes.Contains(p, []byte("take")) && bytes.Contains(p, key) })
}

// leave runs first.Take(id, sku: 1) with the gate shut after pass writes,
// has its caller leave once the gate holds a write, and returns its answer.
func (l late) leave(t *testing.T, pass int, id, sku string) error {
	ctx, leave := context.WithCancel(t.Context())
	defer leave()
	done := make(chan error, 1)
	l.gate.HoldAfter(pass)
	go func() { done <- l.first.Take(ctx, id, line(sku, 1)) }()
	<-l.gate.Blocked()
	leave()
	return <-done
}

// delivered closes the gated client (its connections end once they have
// delivered what they hold), releases the gate and waits until no server
// has a gated connection left, so every server has run all that was held.
func (l late) delivered(t *testing.T) {
	t.Helper()
	l.gated.Close()
	l.gate.Release()
	ctx := t.Context()
	count := func() int {
		var mu sync.Mutex
		n := 0
		each := func(ctx context.Context, c *redis.Client) error {
			list, err := c.ClientList(ctx).Result()
			mu.Lock()
			defer mu.Unlock()
			n += strings.Count(list, " name="+l.name+" ")
			return err
		}
		var err error
		if cc, ok := l.plain.(*redis.ClusterClient); ok {
			err = cc.ForEachMaster(ctx, each)
		} else {
			err = each(ctx, l.plain.(*redis.Client))
		}
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	for deadline := time.Now().Add(30 * time.Second); count() > 0; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the gated connections never ended")
		}
	}
}

// refusedThenLate: the first attempt at order id (one unit of sku, none in
// stock) is held on its way after pass writes while its caller leaves;
// the repeat, on another client, is refused; the unit is restocked; the
// held bytes reach Redis. The order must not be recorded, the unit stays
// in stock, and a later call under id takes it afresh.
func (l late) refusedThenLate(t *testing.T, pass int, id, sku string) {
	ctx := t.Context()
	if err := l.repeat.SetStock(ctx, sku, 0); err != nil {
		t.Fatal(err)
	}
	if err := l.leave(t, pass, id, sku); !errors.Is(err, stockguard.ErrOutcomeUnknown) {
		t.Fatalf("first attempt, caller left: %v, want ErrOutcomeUnknown", err)
	}
	if err := l.repeat.Take(ctx, id, line(sku, 1)); !errors.Is(err, stockguard.ErrInsufficientStock) {
		t.Fatalf("repeat: %v, want ErrInsufficientStock", err)
	}
	if err := l.repeat.SetStock(ctx, sku, 1); err != nil {
		t.Fatal(err)
	}
	l.delivered(t)
	wantState(t, l.repeat, id, 0)
	wantLevels(t, l.repeat, map[string]int64{sku: 1})
	if err := l.repeat.Take(ctx, id, line(sku, 1)); err != nil {
		t.Fatalf("a later call under the refused ID: %v, want it taken afresh", err)
	}
	wantState(t, l.repeat, id, stockguard.OrderTaken)
	wantLevels(t, l.repeat, map[string]int64{sku: 0})
}

// TestAtomic_lateFirstAttempt_refusedRepeatIsFinal: a first attempt whose
// bytes reach Redis after its caller left and after its repeat was refused
// is never applied — held as its order script (one slot), its begin or its
// line's take (two-phase, the take then resumed by the repeat).
func TestAtomic_lateFirstAttempt_refusedRepeatIsFinal(t *testing.T) {
	for _, c := range []struct {
		name     string
		twoPhase bool
		pass     int // writes let through before the gate shuts
	}{
		{"oneScript", false, 0},
		{"twoPhase/begin", true, 0},
		{"twoPhase/take", true, 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			l := newGatedLate(t, "late-"+strings.ReplaceAll(c.name, "/", "-"), c.twoPhase)
			l.refusedThenLate(t, c.pass, "x", "s")
		})
	}
}

// TestAtomic_cluster_lateFirstAttempt_refusedRepeatIsFinal is
// TestAtomic_lateFirstAttempt_refusedRepeatIsFinal on the Cluster: an order
// whose keys share a slot (its SKU is its ID), and one across shards held
// at its begin and at its line's take.
func TestAtomic_cluster_lateFirstAttempt_refusedRepeatIsFinal(t *testing.T) {
	cl := backendstest.SharedCluster(t)
	plain := clusterClient(t)
	masters := clusterMasters(t, plain)
	for _, c := range []struct {
		name   string
		spread bool
		pass   int
	}{
		{"oneSlot", false, 0},
		{"twoPhase/begin", true, 0},
		{"twoPhase/take", true, 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			gate := netgate.New(t)
			name := "late-cluster-" + strings.ReplaceAll(c.name, "/", "-")
			_, opt := gatedOptions(gate, name)
			opt.Addrs = cl.Addrs()
			l := newLate(t, plain, redis.NewClusterClient(&opt), gate, name, false)
			id, sku := "x", "x"
			if c.spread {
				sku = spreadSKUs(t, l.repeat, masters, id, 1)[0]
			}
			// Loads the scripts on every master and opens a gated
			// connection to each: an order recorded on each.
			for _, s := range []*redis.Script{placeScript, readScript, recordScript, lineScript, setStockScript, stockScript} {
				if err := s.Load(t.Context(), plain).Err(); err != nil {
					t.Fatal(err)
				}
			}
			warm := map[string]bool{}
			for i := 0; len(warm) < len(distinct(masters)); i++ {
				w := fmt.Sprint("w", i)
				if m := masters[slot(l.first.orderKey(w))]; !warm[m] {
					warm[m] = true
					stockAll(t, l.repeat, 1, w)
					if err := l.first.Take(t.Context(), w, line(w, 1)); err != nil {
						t.Fatal(err)
					}
				}
			}
			l.refusedThenLate(t, c.pass, id, sku)
		})
	}
}

// distinct is the set of masters' names in masters.
func distinct(masters map[uint16]string) map[string]bool {
	names := map[string]bool{}
	for _, m := range masters {
		names[m] = true
	}
	return names
}

// TestAtomic_twoPhase_resumersLateTakeAfterTheUndo_takesNothing: a repeat
// resumes a pending two-phase attempt while its first caller still runs
// it, and the repeat's take of line a is held on its way while its caller
// leaves; the first caller then has a line refused, undoes the attempt
// and is answered ErrInsufficientStock; the refused line is restocked;
// the held bytes reach Redis. Nothing of the refused order may be taken:
// the undo must fence every line against the takes of everyone resuming
// the attempt, the lines the first caller took and those refused to it.
func TestAtomic_twoPhase_resumersLateTakeAfterTheUndo_takesNothing(t *testing.T) {
	for _, c := range []struct {
		name    string
		lines   []stockguard.Line
		initial map[string]int64 // before the order
		restock string           // the SKU refused, restocked before the delivery
		want    map[string]int64
	}{
		{"refusedLine", []stockguard.Line{line("a", 1)}, map[string]int64{"a": 0}, "a", map[string]int64{"a": 1}},
		{"takenLine", []stockguard.Line{line("a", 1), line("b", 1)}, map[string]int64{"a": 1, "b": 0}, "b", map[string]int64{"a": 1, "b": 1}},
	} {
		t.Run(c.name, func(t *testing.T) {
			l := newGatedLate(t, "resumer-"+c.name, true)
			for sku, n := range c.initial {
				stockAll(t, l.repeat, n, sku)
			}
			const id = "x"
			l.holdTake("a", id)
			resumed := false
			l.repeat.hook = func(point string) error {
				if point != "begun" || resumed {
					return nil
				}
				resumed = true
				ctx, leave := context.WithCancel(t.Context())
				done := make(chan error, 1)
				go func() { done <- l.first.Take(ctx, id, c.lines...) }()
				<-l.gate.Blocked()
				leave()
				if err := <-done; !errors.Is(err, stockguard.ErrOutcomeUnknown) {
					t.Errorf("the resumer, caller left: %v, want ErrOutcomeUnknown", err)
				}
				return nil
			}
			if err := l.repeat.Take(t.Context(), id, c.lines...); !errors.Is(err, stockguard.ErrInsufficientStock) {
				t.Fatalf("first caller: %v, want ErrInsufficientStock", err)
			}
			l.repeat.hook = nil
			if !resumed {
				t.Fatal("the attempt was never begun")
			}
			stockAll(t, l.repeat, 1, c.restock)
			l.delivered(t)
			wantState(t, l.repeat, id, 0)
			wantLevels(t, l.repeat, c.want)
		})
	}
}

// TestAtomic_twoPhase_lateTakeOfAHold_isDueByItsDeadline: a two-phase
// hold's take is held on its way past the hold's deadline, then delivered;
// the hold commits (already past its deadline). Its unit must count as
// back at once: the line may be due no later than the record's deadline,
// however late its take landed.
func TestAtomic_twoPhase_lateTakeOfAHold_isDueByItsDeadline(t *testing.T) {
	l := newGatedLate(t, "late-hold-take", true)
	stockAll(t, l.repeat, 1, "s")
	const ttl = 100 * time.Millisecond
	l.holdTake("s", "h")
	done := make(chan error, 1)
	go func() { done <- l.first.Hold(t.Context(), "h", ttl, line("s", 1)) }()
	<-l.gate.Blocked()
	time.Sleep(3 * ttl)
	l.gate.Release()
	if err := <-done; err != nil {
		t.Fatalf("Hold whose take arrived late: %v", err)
	}
	wantLevels(t, l.repeat, map[string]int64{"s": 1})
	wantState(t, l.repeat, "h", stockguard.OrderExpired)
}

// TestAtomic_lateFirstAttempt_pastItsDeadline_isNeverApplied: a first
// attempt whose bytes reach Redis past its validity plus the clock skew
// does nothing, with no refusal to fence it: one script, and a two-phase
// begin.
func TestAtomic_lateFirstAttempt_pastItsDeadline_isNeverApplied(t *testing.T) {
	const validity, skew = 50 * time.Millisecond, time.Millisecond
	for _, m := range orderModes {
		t.Run(m.name, func(t *testing.T) {
			l := newGatedLate(t, "expired-"+m.name, m.twoPhase, WithAttemptValidity(validity), WithClockSkew(skew))
			stockAll(t, l.repeat, 1, "s")
			sent := time.Now()
			if err := l.leave(t, 0, "x", "s"); !errors.Is(err, stockguard.ErrOutcomeUnknown) {
				t.Fatalf("first attempt, caller left: %v, want ErrOutcomeUnknown", err)
			}
			// The gated client's read timeout (1s) has passed: so has the
			// attempt's expiry, by this host's clock, which the server's is.
			if past := time.Since(sent); past <= validity+skew {
				t.Fatalf("the caller left after %v, before the attempt expired", past)
			}
			l.delivered(t)
			wantState(t, l.repeat, "x", 0)
			wantLevels(t, l.repeat, map[string]int64{"s": 1})
		})
	}
}

func TestAtomic_fenceOptions_refuseBadValues(t *testing.T) {
	rdb := backendstest.RedisClient(t)
	for name, opt := range map[string]Option{
		"validity 0":  WithAttemptValidity(0),
		"validity -1": WithAttemptValidity(-time.Second),
		"skew 0":      WithClockSkew(0),
		"skew -1":     WithClockSkew(-time.Second),
	} {
		if _, err := NewAtomic(rdb, opt); !errors.Is(err, stockguard.ErrInvalidRequest) {
			t.Errorf("%s: %v, want ErrInvalidRequest", name, err)
		}
	}
}
