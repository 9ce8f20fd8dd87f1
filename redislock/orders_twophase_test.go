package redislock

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stockguard/stockguard"
	"github.com/stockguard/stockguard/internal/backends/backendstest"
	"github.com/stockguard/stockguard/internal/redistest"
	"github.com/stockguard/stockguard/internal/redisx/cutproxy"
)

// errKilled stands for a client that died at a hook's point.
var errKilled = errors.New("client killed")

// killAt returns a hook that kills the call at point, once.
func killAt(point string) func(string) error {
	done := false
	return func(p string) error {
		if p == point && !done {
			done = true
			return errKilled
		}
		return nil
	}
}

// TestAtomic_twoPhase_killedBetweenPhases kills the client at each point
// of the protocol and checks that nothing stays taken for good: the next
// call under the ID, or the pending deadline, finishes or undoes it.
func TestAtomic_twoPhase_killedBetweenPhases(t *testing.T) {
	rdb := backendstest.RedisClient(t)
	const window = 200 * time.Millisecond
	setup := func(t *testing.T, point string) (*Atomic, *Atomic) {
		prefix := redistest.Prefix(t, rdb)
		dying := newOrders(rdb, prefix, true)
		dying.pending, dying.hook = window, killAt(point)
		other := newOrders(rdb, prefix, true)
		other.pending = window
		stockAll(t, other, 10, "a", "b")
		return dying, other
	}
	cart := []stockguard.Line{line("a", 3), line("b", 4)}
	kill := func(t *testing.T, err error) {
		t.Helper()
		if !errors.Is(err, errKilled) {
			t.Fatalf("call = %v, want it killed", err)
		}
	}
	ctx := t.Context()

	t.Run("beforeCommit/deadlineUndoes", func(t *testing.T) {
		var other *Atomic
		withinWindow(t, window, func() (time.Time, error) {
			var dying *Atomic
			dying, other = setup(t, "taken")
			began := time.Now()
			kill(t, dying.Take(ctx, "o", cart...))
			// Pending: the units are out, and nobody may take them yet.
			if err := other.Decrement(ctx, "b", 7); !errors.Is(err, stockguard.ErrInsufficientStock) {
				return began, fmt.Errorf("Decrement of a pending order's units: %v, want ErrInsufficientStock", err)
			}
			return began, nil
		})
		time.Sleep(window + 50*time.Millisecond)
		if err := other.Decrement(ctx, "b", 10); err != nil {
			t.Fatalf("Decrement after the pending deadline: %v", err)
		}
		wantLevels(t, other, map[string]int64{"a": 10, "b": 0})
		wantState(t, other, "o", 0)
	})
	t.Run("beforeCommit/retryFinishes", func(t *testing.T) {
		dying, other := setup(t, "taken")
		kill(t, dying.Take(ctx, "o", cart...))
		if err := other.Take(ctx, "o", cart...); err != nil {
			t.Fatalf("retry: %v", err)
		}
		time.Sleep(window + 50*time.Millisecond)
		wantLevels(t, other, map[string]int64{"a": 7, "b": 6})
		wantState(t, other, "o", stockguard.OrderTaken)
	})
	t.Run("beforeCommit/orderFinishes", func(t *testing.T) {
		var other *Atomic
		withinWindow(t, window, func() (time.Time, error) {
			var dying *Atomic
			dying, other = setup(t, "taken")
			began := time.Now()
			kill(t, dying.Hold(ctx, "o", time.Minute, cart...))
			if info, err := other.Order(ctx, "o"); err != nil || info.State != stockguard.OrderHeld {
				return began, fmt.Errorf("Order of a pending hold = %v, %v; want %v", info.State, err, stockguard.OrderHeld)
			}
			return began, nil
		})
		time.Sleep(window + 50*time.Millisecond)
		wantLevels(t, other, map[string]int64{"a": 7, "b": 6})
		wantState(t, other, "o", stockguard.OrderHeld)
	})
	t.Run("afterBegin", func(t *testing.T) {
		dying, other := setup(t, "begun")
		kill(t, dying.Take(ctx, "o", cart...))
		time.Sleep(window + 50*time.Millisecond)
		wantState(t, other, "o", 0)
		wantLevels(t, other, map[string]int64{"a": 10, "b": 10})
	})
	t.Run("afterCommit", func(t *testing.T) {
		dying, other := setup(t, "committed")
		kill(t, dying.Take(ctx, "o", cart...))
		wantState(t, other, "o", stockguard.OrderTaken)
		time.Sleep(window + 50*time.Millisecond)
		// The lines were due: Stock asks the record, which says taken.
		wantLevels(t, other, map[string]int64{"a": 7, "b": 6})
		if err := other.Return(ctx, "o"); err != nil {
			t.Fatal(err)
		}
		wantLevels(t, other, map[string]int64{"a": 10, "b": 10})
	})
	t.Run("afterCommit/retentionPasses", func(t *testing.T) {
		// The finalize after the commit is lost and nothing touches the
		// SKUs until the record's retention has passed: the take was
		// committed, so it stays taken whatever became of the record.
		dying, other := setup(t, "committed")
		const retention = 300 * time.Millisecond
		dying.retention, other.retention = retention, retention
		kill(t, dying.Take(ctx, "o", cart...))
		time.Sleep(window + retention + 200*time.Millisecond)
		wantLevels(t, other, map[string]int64{"a": 7, "b": 6})
		if err := other.Decrement(ctx, "b", 7); !errors.Is(err, stockguard.ErrInsufficientStock) {
			t.Errorf("Decrement of a committed take's units: %v, want ErrInsufficientStock", err)
		}
		wantLevels(t, other, map[string]int64{"a": 7, "b": 6})
	})
	t.Run("confirmedHold/retentionPasses", func(t *testing.T) {
		// The same for a hold confirmed by a client that dies before its
		// lines hear of it.
		const retention, hold = 300 * time.Millisecond, 100 * time.Millisecond
		var other *Atomic
		withinWindow(t, hold, func() (time.Time, error) {
			var dying *Atomic
			dying, other = setup(t, "")
			dying.retention, other.retention = retention, retention
			began := time.Now()
			if err := other.Hold(ctx, "o", hold, cart...); err != nil {
				t.Fatal(err)
			}
			dying.hook = func(p string) error {
				if p == "confirmed" {
					return errKilled
				}
				return nil
			}
			if err := dying.Confirm(ctx, "o"); !errors.Is(err, errKilled) {
				return began, fmt.Errorf("Confirm = %v, want it killed", err)
			}
			return began, nil
		})
		time.Sleep(window + retention + 200*time.Millisecond)
		wantLevels(t, other, map[string]int64{"a": 7, "b": 6})
	})
	t.Run("holdBeforeCommit", func(t *testing.T) {
		dying, other := setup(t, "taken")
		kill(t, dying.Hold(ctx, "o", time.Hour, cart...))
		time.Sleep(window + 50*time.Millisecond)
		// Back at the pending deadline, not the hour's.
		if err := other.Decrement(ctx, "a", 10); err != nil {
			t.Fatalf("Decrement after the pending deadline: %v", err)
		}
		wantState(t, other, "o", 0)
	})
	t.Run("returnBeforeDecision", func(t *testing.T) {
		dying, other := setup(t, "armed")
		if err := other.Take(ctx, "o", cart...); err != nil {
			t.Fatal(err)
		}
		kill(t, dying.Return(ctx, "o"))
		// Armed lines are due at once; the record still says taken.
		wantLevels(t, other, map[string]int64{"a": 7, "b": 6})
		wantState(t, other, "o", stockguard.OrderTaken)
		if err := other.Return(ctx, "o"); err != nil {
			t.Fatal(err)
		}
		if err := other.Return(ctx, "o"); err != nil {
			t.Fatal(err)
		}
		wantLevels(t, other, map[string]int64{"a": 10, "b": 10})
	})
}

// TestAtomic_twoPhase_staleReaderDuringReturn: a Return's client dies with
// the lines armed; a reader read the record (taken) before that and
// stalls past the grace; meanwhile another Return decides (returned) and
// loses its tidy. The stale reader's view must not keep the units taken:
// they come back, and any later Return of the order finishes the job.
func TestAtomic_twoPhase_staleReaderDuringReturn(t *testing.T) {
	rdb := backendstest.RedisClient(t)
	prefix := redistest.Prefix(t, rdb)
	a := newOrders(rdb, prefix, true)
	dying := newOrders(rdb, prefix, true)
	dying.hook = killAt("armed")
	ctx := t.Context()
	stockAll(t, a, 10, "a", "b")
	cart := []stockguard.Line{line("a", 3), line("b", 4)}
	if err := a.Take(ctx, "o", cart...); err != nil {
		t.Fatal(err)
	}
	asked := time.Now()
	stale, err := a.recordOp(ctx, "o", "view")
	if err != nil {
		t.Fatal(err)
	}
	if err := dying.Return(ctx, "o"); !errors.Is(err, errKilled) {
		t.Fatalf("Return = %v, want it killed", err)
	}
	time.Sleep(returnGrace + 100*time.Millisecond)
	// Another Return decides, and its client dies before the lines hear.
	if _, err := a.recordOp(ctx, "o", "return", stale.disarms); err != nil {
		t.Fatal(err)
	}
	// The stale reader applies what it read long ago.
	for _, l := range cart {
		_, err := lineScript.Run(ctx, a.scripts, a.lineKeys(l.SKU, "o"), "resolve", "o", stale.nonce,
			a.retention.Milliseconds(), string(stale.stateOrNone()), stale.now, stale.deadline, returnGrace.Microseconds(),
			time.Since(asked).Microseconds()).Slice()
		if err != nil {
			t.Fatal(err)
		}
	}
	wantLevels(t, a, map[string]int64{"a": 10, "b": 10})
	wantState(t, a, "o", stockguard.OrderReturned)
	if err := a.Return(ctx, "o"); err != nil {
		t.Fatal(err)
	}
	wantLevels(t, a, map[string]int64{"a": 10, "b": 10})
}

// TestAtomic_twoPhase_clockSkew runs two-phase holds whose record's server
// keeps a clock 10s ahead of, or behind, the SKUs' server. A hold's units
// are held while it lasts — a read then answers at once, without spinning
// — and back once it expired by the record's clock, without waiting for
// the skew.
func TestAtomic_twoPhase_clockSkew(t *testing.T) {
	rdb := backendstest.RedisClient(t)
	reads := &scriptHook{script: stockScript}
	rdb.AddHook(reads)
	const ttl = 1500 * time.Millisecond
	for _, skew := range []time.Duration{10 * time.Second, -10 * time.Second} {
		t.Run(skew.String(), func(t *testing.T) {
			a := newOrders(rdb, redistest.Prefix(t, rdb), true)
			a.recordSkew = skew
			ctx := t.Context()
			stockAll(t, a, 10, "a", "b")
			placed := time.Now()
			if err := a.Hold(ctx, "o", ttl, line("a", 3), line("b", 4)); err != nil {
				t.Fatal(err)
			}
			// The record's clock started the hold after placed and before
			// Hold returned: it lasts from placed+ttl to held+ttl at least.
			held := time.Now()
			before := reads.runs.Load()
			levels := map[string]int64{}
			for _, sku := range []string{"a", "b"} {
				n, err := a.Stock(ctx, sku)
				if err != nil {
					t.Fatal(err)
				}
				levels[sku] = n
			}
			// Each read runs the stock script once, or, finding a due line,
			// once more after resolving it; one spinning until the skew
			// passed would run it for as long as the hold lasts.
			if n := reads.runs.Load() - before; n > 4 {
				t.Errorf("2 reads during the hold ran the stock script %d times", n)
			}
			// A read that ended after placed+ttl may have seen the hold
			// expired (a stall): only one that ended before must see it.
			if time.Since(placed) < ttl && (levels["a"] != 7 || levels["b"] != 6) {
				t.Errorf("levels during the hold %v, want a 7, b 6", levels)
			}
			time.Sleep(time.Until(held.Add(ttl + 200*time.Millisecond)))
			wantLevels(t, a, map[string]int64{"a": 10, "b": 10})
			wantState(t, a, "o", stockguard.OrderExpired)
		})
	}
}

// TestAtomic_Orders_replyLost loses the reply of each write of an order:
// the caller hears ErrOutcomeUnknown, and the same call again converges on
// the order taken once.
func TestAtomic_Orders_replyLost(t *testing.T) {
	srv := backendstest.SharedRedis(t)
	points := map[string][]string{"oneScript": {""}, "twoPhase": {"", "begun", "taken"}}
	for _, m := range orderModes {
		for _, point := range points[m.name] {
			t.Run(m.name+"/"+point, func(t *testing.T) {
				proxy := cutproxy.Start(t, srv.Addr)
				rdb := redis.NewClient(&redis.Options{Addr: proxy.Addr, MaxRetries: 3})
				t.Cleanup(func() { rdb.Close() })
				a := newOrders(rdb, redistest.Prefix(t, backendstest.RedisClient(t)), m.twoPhase)
				ctx := t.Context()
				stockAll(t, a, 10, "a")
				if err := a.Take(ctx, "warm", line("a", 1)); err != nil { // loads the scripts
					t.Fatal(err)
				}
				cut := func(p string) error {
					if p == point {
						proxy.CutNextReply()
					}
					return nil
				}
				if point == "" {
					proxy.CutNextReply()
				} else {
					a.hook = cut
				}
				if err := a.Take(ctx, "o", line("a", 3)); !errors.Is(err, stockguard.ErrOutcomeUnknown) {
					t.Fatalf("Take with a reply lost: %v, want ErrOutcomeUnknown", err)
				}
				a.hook = nil
				if err := a.Take(ctx, "o", line("a", 3)); err != nil {
					t.Fatalf("retry: %v", err)
				}
				wantLevels(t, a, map[string]int64{"a": 6})
				wantState(t, a, "o", stockguard.OrderTaken)
			})
		}
	}
}

// TestAtomic_twoPhase_slowReturn stalls a Return past its grace with its
// lines armed: a reader meanwhile finds the record still taken and takes
// the lines back out of the holds. The Return then goes on, and its
// give-back after the record's decision does not reach the lines (its
// context ends, or its client dies). Whatever it answered, once it has
// answered nil or the order says returned, the units come back by the next
// reader, exactly once.
func TestAtomic_twoPhase_slowReturn(t *testing.T) {
	rdb := backendstest.RedisClient(t)
	slowReturn(t, func(t *testing.T) (*Atomic, []string) {
		a := newOrders(rdb, redistest.Prefix(t, rdb), true)
		return a, []string{"a", "b"}
	})
}

// slowReturn runs TestAtomic_twoPhase_slowReturn over the Atomic and two
// SKUs that setup returns, whose orders go through the two-phase protocol.
func slowReturn(t *testing.T, setup func(t *testing.T) (*Atomic, []string)) {
	for _, end := range []string{"canceled", "killed"} {
		t.Run(end, func(t *testing.T) {
			reader, skus := setup(t)
			// A grace below a microsecond: the reader finds the armed
			// lines past it at once, as one would after a stall over 1s.
			reader.grace = time.Nanosecond
			ret := *reader
			ret.grace = 0
			stockAll(t, reader, 10, skus...)
			cart := []stockguard.Line{line(skus[0], 3), line(skus[1], 4)}
			if err := reader.Take(t.Context(), "o", cart...); err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			armed := 0
			ret.hook = func(p string) error {
				switch {
				case p == "armed":
					armed++
					if armed == 1 {
						// The stall: a reader resolves the armed lines.
						wantLevels(t, reader, map[string]int64{skus[0]: 7, skus[1]: 6})
					}
				case p == "decided" && end == "canceled":
					cancel()
				case p == "decided":
					return errKilled
				}
				return nil
			}
			retErr := ret.Return(ctx, "o")
			switch {
			case end == "killed" && !errors.Is(retErr, errKilled):
				t.Fatalf("Return = %v, want it killed", retErr)
			case end == "canceled" && retErr != nil && !errors.Is(retErr, stockguard.ErrOutcomeUnknown):
				t.Fatalf("Return = %v, want nil or ErrOutcomeUnknown", retErr)
			case armed != 2:
				t.Errorf("the Return armed its lines %d times, want 2 (once more after the reader disarmed it)", armed)
			}
			info, err := reader.Order(t.Context(), "o")
			if err != nil {
				t.Fatal(err)
			}
			if retErr == nil || info.State == stockguard.OrderReturned {
				// Answered or decided: no further call under the ID may
				// be needed for the units to come back.
				wantLevels(t, reader, map[string]int64{skus[0]: 10, skus[1]: 10})
			}
			// A repeat of the Return finishes whatever is left, once.
			if err := reader.Return(t.Context(), "o"); err != nil {
				t.Fatal(err)
			}
			wantLevels(t, reader, map[string]int64{skus[0]: 10, skus[1]: 10})
			wantState(t, reader, "o", stockguard.OrderReturned)
		})
	}
}

// TestAtomic_twoPhase_lostSeal loses the seal of a taken two-phase order
// (orders_record.lua), after every line heard that it is taken.
func TestAtomic_twoPhase_lostSeal(t *testing.T) {
	rdb := backendstest.RedisClient(t)
	cart := []stockguard.Line{line("a", 3), line("b", 4)}
	setup := func(t *testing.T) *Atomic {
		a := newOrders(rdb, redistest.Prefix(t, rdb), true)
		stockAll(t, a, 10, "a", "b")
		return a
	}
	// ttl is the record's time to live (-1: none).
	ttl := func(t *testing.T, a *Atomic) time.Duration {
		t.Helper()
		d, err := rdb.PTTL(t.Context(), a.orderKey("o")).Result()
		if err != nil {
			t.Fatal(err)
		}
		return d
	}

	t.Run("sealFails/notNil", func(t *testing.T) {
		// The seal's request fails (here: the caller's context ends just
		// before it): the Take may not answer nil, which would leave the
		// record kept forever; a repeat seals it.
		a := setup(t)
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		a.hook = func(p string) error {
			if p == "finalized" {
				cancel()
			}
			return nil
		}
		if err := a.Take(ctx, "o", cart...); !errors.Is(err, stockguard.ErrOutcomeUnknown) {
			t.Fatalf("Take with its seal failed = %v, want ErrOutcomeUnknown", err)
		}
		a.hook = nil
		if err := a.Take(t.Context(), "o", cart...); err != nil {
			t.Fatalf("repeat: %v", err)
		}
		if d := ttl(t, a); d <= 0 || d > a.retention {
			t.Errorf("record's TTL after the repeat = %v, want its retention %v", d, a.retention)
		}
		wantLevels(t, a, map[string]int64{"a": 7, "b": 6})
	})
	t.Run("retrySealFails", func(t *testing.T) {
		// The client dies before its seal; a retry of the Take finds the
		// record unsealed, and its own seal fails too: it says so.
		a := setup(t)
		a.hook = killAt("finalized")
		if err := a.Take(t.Context(), "o", cart...); !errors.Is(err, stockguard.ErrOutcomeUnknown) {
			t.Fatalf("Take killed before its seal = %v, want ErrOutcomeUnknown", err)
		}
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		a.hook = func(p string) error {
			if p == "finalized" {
				cancel()
			}
			return nil
		}
		if err := a.Take(ctx, "o", cart...); !errors.Is(err, stockguard.ErrOutcomeUnknown) {
			t.Fatalf("retry with its seal failed = %v, want ErrOutcomeUnknown", err)
		}
		a.hook = nil
		if err := a.Take(t.Context(), "o", cart...); err != nil {
			t.Fatalf("second retry: %v", err)
		}
		if d := ttl(t, a); d <= 0 || d > a.retention {
			t.Errorf("record's TTL after the second retry = %v, want its retention %v", d, a.retention)
		}
		wantLevels(t, a, map[string]int64{"a": 7, "b": 6})
	})
	t.Run("returnPastLineRetention", func(t *testing.T) {
		// The client dies before its seal; the line records' retention
		// passes (deleted here, as their expiry would). A Return then may
		// not answer nil without giving anything back: the order is past
		// its retention, ErrUnknownOrder, and the record is sealed now.
		a := setup(t)
		a.hook = killAt("finalized")
		if err := a.Take(t.Context(), "o", cart...); !errors.Is(err, stockguard.ErrOutcomeUnknown) {
			t.Fatalf("Take killed before its seal = %v, want ErrOutcomeUnknown", err)
		}
		a.hook = nil
		if d := ttl(t, a); d != -1 {
			t.Fatalf("record's TTL before its seal = %v, want none", d)
		}
		for _, l := range cart {
			if err := rdb.Del(t.Context(), a.lineKey(l.SKU, "o")).Err(); err != nil {
				t.Fatal(err)
			}
		}
		if err := a.Return(t.Context(), "o"); !errors.Is(err, stockguard.ErrUnknownOrder) {
			t.Errorf("Return past the lines' retention = %v, want ErrUnknownOrder", err)
		}
		wantLevels(t, a, map[string]int64{"a": 7, "b": 6})
		if d := ttl(t, a); d <= 0 || d > a.retention {
			t.Errorf("record's TTL after the Return = %v, want its retention %v", d, a.retention)
		}
		if err := a.Return(t.Context(), "o"); !errors.Is(err, stockguard.ErrUnknownOrder) {
			t.Errorf("second Return = %v, want ErrUnknownOrder", err)
		}
		wantLevels(t, a, map[string]int64{"a": 7, "b": 6})
	})
}

// TestAtomic_reclaim_scanBounded fills a sold-out SKU's holds with due
// lines of two-phase orders (their records elsewhere) and counts the pages
// (ZRANGEBYSCORE) one script reads before it answers with the first 64 to
// resolve: a bounded number, not one per 64 due lines, each from a growing
// offset; and told to decide without them, at most 16 a call. Counted by
// the server (INFO commandstats) on a private Redis.
func TestAtomic_reclaim_scanBounded(t *testing.T) {
	srv := backendstest.PrivateRedis(t, 1)[0]
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr})
	t.Cleanup(func() { rdb.Close() })
	a := newOrders(rdb, "", true)
	ctx := t.Context()
	stockAll(t, a, 0, "hot")
	const due = 5000
	members := make([]redis.Z, due)
	for i := range members {
		members[i] = redis.Z{Score: float64(1 + i/3), Member: fmt.Sprintf("~o%d", i)} // some share a score
	}
	// Behind them, a due hold of a one-slot order: 1 unit.
	members = append(members, redis.Z{Score: due, Member: "1 local"})
	if err := rdb.ZAdd(ctx, a.holdsKey("hot"), members...).Err(); err != nil {
		t.Fatal(err)
	}
	pages := func() int64 {
		t.Helper()
		info, err := rdb.Info(ctx, "commandstats").Result()
		if err != nil {
			t.Fatal(err)
		}
		_, rest, found := strings.Cut(info, "cmdstat_zrangebyscore:calls=")
		if !found {
			return 0
		}
		n, err := strconv.ParseInt(rest[:strings.IndexByte(rest, ',')], 10, 64)
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	keys := []string{a.keys.Stock("hot"), a.holdsKey("hot")}
	scripts := []struct {
		name string
		run  func() ([]any, error)
	}{
		{"decrement", func() ([]any, error) { return decrementScript.Run(ctx, a.scripts, keys, 1, "0").Slice() }},
		{"take", func() ([]any, error) {
			return lineScript.Run(ctx, a.scripts, a.lineKeys("hot", "x"), "take", "x", "1.n", 1, 1000, "0", time.Now().Add(time.Minute).UnixMicro()).Slice()
		}},
	}
	for _, sc := range scripts {
		name, run := sc.name, sc.run
		before := pages()
		reply, err := run()
		if err != nil {
			t.Fatal(err)
		}
		if n := pages() - before; n > 2 {
			t.Errorf("%s read %d pages of due holds, want at most 2", name, n)
		}
		if got := len(replyStrings(reply, 1)); replyInt(reply, 0) != codeResolve || got != 64 {
			t.Fatalf("%s = %d with %d ids, want %d with 64", name, replyInt(reply, 0), got, codeResolve)
		}
	}
	// Told to decide without them, the script walks on through them, 16
	// pages a call, each call from where the last one stopped, until it
	// finds the one-slot hold behind them all (ties included), gives it
	// back and takes it.
	decide, calls := "1", 0
	for ; calls < due/64; calls++ {
		before := pages()
		reply, err := decrementScript.Run(ctx, a.scripts, keys, 1, decide).Slice()
		if err != nil {
			t.Fatal(err)
		}
		if n := pages() - before; n > 16 {
			t.Errorf("decrement without the remote holds read %d pages, want at most 16", n)
		}
		if replyInt(reply, 0) == 0 {
			break
		}
		if replyInt(reply, 0) != codeMore {
			t.Fatalf("decrement without the remote holds = %v; want {0} or {%d, cursor}", reply, codeMore)
		}
		decide = replyString(reply, 1)
	}
	if want := due/(16*64) + 1; calls+1 != want {
		t.Errorf("decrement took %d calls to reach the hold, want %d", calls+1, want)
	}
	wantLevels(t, a, map[string]int64{"hot": 0})
}

// TestAtomic_twoPhase_restockLineOutlivesWindow: a two-phase Restock's
// line record says its units were added; a retry resumes the attempt
// until its record goes, a pending window (or more) later. With a
// retention shorter than that window, the line record must still outlive
// it, or the retry adds the units again.
func TestAtomic_twoPhase_restockLineOutlivesWindow(t *testing.T) {
	rdb := backendstest.RedisClient(t)
	a := newOrders(rdb, redistest.Prefix(t, rdb), true, WithOrderRetention(MinOrderRetention))
	stockAll(t, a, 10, "a")
	a.hook = killAt("taken")
	if err := a.Restock(t.Context(), "r", "a", 5); !errors.Is(err, errKilled) {
		t.Fatalf("Restock = %v, want it killed", err)
	}
	ttl, err := rdb.PTTL(t.Context(), a.lineKey("a", "r")).Result()
	if err != nil {
		t.Fatal(err)
	}
	if ttl < pendingWindow {
		t.Errorf("the restock's line record lives %v, want at least the pending window %v", ttl, pendingWindow)
	}
	a.hook = nil
	if err := a.Restock(t.Context(), "r", "a", 5); err != nil {
		t.Fatal(err)
	}
	wantLevels(t, a, map[string]int64{"a": 15})
}

// TestAtomic_twoPhase_armedOutlivesRecord: a Return of a sealed taken
// order arms its lines and its client dies. Until a reader takes them back
// (disarming the record), the record may not expire: a line armed with no
// record would be given back, the units of an order taken for good.
func TestAtomic_twoPhase_armedOutlivesRecord(t *testing.T) {
	rdb := backendstest.RedisClient(t)
	prefix := redistest.Prefix(t, rdb)
	reader := newOrders(rdb, prefix, true)
	reader.grace = time.Nanosecond // past the grace at once
	dying := newOrders(rdb, prefix, true)
	dying.hook = killAt("armed")
	ctx := t.Context()
	stockAll(t, reader, 10, "a", "b")
	cart := []stockguard.Line{line("a", 3), line("b", 4)}
	if err := reader.Take(ctx, "o", cart...); err != nil {
		t.Fatal(err)
	}
	ttl := func() time.Duration {
		t.Helper()
		d, err := rdb.PTTL(ctx, reader.orderKey("o")).Result()
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	if d := ttl(); d <= 0 {
		t.Fatalf("sealed record's TTL = %v, want its retention", d)
	}
	if err := dying.Return(ctx, "o"); !errors.Is(err, errKilled) {
		t.Fatalf("Return = %v, want it killed", err)
	}
	if d := ttl(); d != -1 {
		t.Errorf("record's TTL with its lines armed = %v, want none", d)
	}
	// Readers take the lines back, and the record is sealed again.
	wantLevels(t, reader, map[string]int64{"a": 7, "b": 6})
	if d := ttl(); d <= 0 || d > reader.retention {
		t.Errorf("record's TTL once its lines are taken back = %v, want its retention", d)
	}
	wantState(t, reader, "o", stockguard.OrderTaken)
	if err := reader.Return(ctx, "o"); err != nil {
		t.Fatal(err)
	}
	wantLevels(t, reader, map[string]int64{"a": 10, "b": 10})
}

// TestAtomic_twoPhase_returnOfRestockKeepsItsRetention: a Return under a
// two-phase Restock's ID is refused and leaves the record's retention
// running.
func TestAtomic_twoPhase_returnOfRestockKeepsItsRetention(t *testing.T) {
	rdb := backendstest.RedisClient(t)
	a := newOrders(rdb, redistest.Prefix(t, rdb), true)
	stockAll(t, a, 10, "a")
	if err := a.Restock(t.Context(), "r", "a", 5); err != nil {
		t.Fatal(err)
	}
	if err := a.Return(t.Context(), "r"); !errors.Is(err, stockguard.ErrOrderMismatch) {
		t.Fatalf("Return of a restock = %v, want ErrOrderMismatch", err)
	}
	if d, err := rdb.PTTL(t.Context(), a.orderKey("r")).Result(); err != nil || d <= 0 {
		t.Errorf("restock record's TTL after a Return = %v, %v; want its retention", d, err)
	}
	wantLevels(t, a, map[string]int64{"a": 15})
}

// withinWindow calls try until its checks hold, and fails t if they fail
// within window of began (taken before try set the deadline its checks
// need ahead): past it, the machine stalled and the deadline passed
// rightly, so try is made again on fresh keys. The test's own timeout is
// the hang guard.
func withinWindow(t *testing.T, window time.Duration, try func() (began time.Time, err error)) {
	t.Helper()
	for {
		began, err := try()
		if err == nil {
			return
		}
		if time.Since(began) < window {
			t.Fatal(err)
		}
		t.Logf("stalled past the %v window (%v): trying again", window, err)
	}
}

// TestAtomic_setStock_settlesDueHoldsFirst fills a SKU's holds with due
// lines of two-phase orders (their records elsewhere) and, among and
// behind them, due holds of one-slot orders, and runs SetStock's script
// told to pass over the remote lines: it reads at most 16 pages a call,
// each call from where the last one stopped, gives back every local hold
// it passes, and sets the level only in the call that has passed them
// all, so that no due hold is left to come back on top of the level set.
// Told to collect the remote lines, it returns the first 64 to resolve
// and sets nothing. Pages counted by the server (INFO commandstats) on a
// private Redis.
func TestAtomic_setStock_settlesDueHoldsFirst(t *testing.T) {
	srv := backendstest.PrivateRedis(t, 1)[0]
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr})
	t.Cleanup(func() { rdb.Close() })
	a := newOrders(rdb, "", true)
	ctx := t.Context()
	stockAll(t, a, 0, "hot")
	const due, every = 3000, 100
	var members []redis.Z
	local := 0
	for i := range due {
		members = append(members, redis.Z{Score: float64(1 + i/3), Member: fmt.Sprintf("~o%d", i)}) // some share a score
		if i%every == 0 {
			members = append(members, redis.Z{Score: float64(1 + i/3), Member: fmt.Sprintf("1 l%d", i)})
			local++
		}
	}
	members = append(members, redis.Z{Score: due, Member: "1 last"}, redis.Z{Score: float64(-(local + 1)), Member: "#out"})
	if err := rdb.ZAdd(ctx, a.holdsKey("hot"), members...).Err(); err != nil {
		t.Fatal(err)
	}
	keys := []string{a.keys.Stock("hot"), a.holdsKey("hot")}
	pages := func() int64 {
		t.Helper()
		info, err := rdb.Info(ctx, "commandstats").Result()
		if err != nil {
			t.Fatal(err)
		}
		_, rest, found := strings.Cut(info, "cmdstat_zrangebyscore:calls=")
		if !found {
			return 0
		}
		n, err := strconv.ParseInt(rest[:strings.IndexByte(rest, ',')], 10, 64)
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	level := func() string {
		t.Helper()
		v, err := rdb.Get(ctx, keys[0]).Result()
		if err != nil {
			t.Fatal(err)
		}
		return v
	}

	reply, err := setStockScript.Run(ctx, a.scripts, keys, 4, "0").Slice()
	if err != nil {
		t.Fatal(err)
	}
	if got := len(replyStrings(reply, 1)); replyInt(reply, 0) != codeResolve || got != 64 {
		t.Fatalf("set stock collecting remote holds = %d with %d ids, want %d with 64", replyInt(reply, 0), got, codeResolve)
	}
	if v := level(); v == "4" {
		t.Fatal("set stock collecting remote holds set the level before they were resolved")
	}

	decide, calls := "1", 0
	for ; calls < due; calls++ {
		before := pages()
		reply, err := setStockScript.Run(ctx, a.scripts, keys, 4, decide).Slice()
		if err != nil {
			t.Fatal(err)
		}
		// 16 pages of due holds, and on the call that sets the level one
		// read of the open ones (SetStockHeld's).
		if n := pages() - before; n > 17 {
			t.Errorf("set stock read %d pages, want at most 16 and the open holds", n)
		}
		if replyInt(reply, 0) == 0 {
			break
		}
		if replyInt(reply, 0) != codeMore {
			t.Fatalf("set stock without the remote holds = %v; want {0} or {%d, cursor}", reply, codeMore)
		}
		if v := level(); v == "4" {
			t.Fatalf("set stock call %d set the level with due holds left to walk", calls+1)
		}
		decide = replyString(reply, 1)
	}
	if want := (due+local+1)/(16*64) + 1; calls+1 != want {
		t.Errorf("set stock took %d calls, want %d", calls+1, want)
	}
	if v := level(); v != "4" {
		t.Errorf("level after set stock = %s, want 4", v)
	}
	left, err := rdb.ZRangeArgs(ctx, redis.ZRangeArgs{Key: keys[1], Start: "-inf", Stop: "+inf", ByScore: true}).Result()
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range left {
		if !strings.HasPrefix(m, "~") {
			t.Errorf("holds keep %q after set stock, want only the remote lines", m)
		}
	}
	if len(left) != due {
		t.Errorf("holds keep %d members, want the %d remote lines", len(left), due)
	}
}

// TestAtomic_twoPhase_undoneAttemptClaimsNoOther: a Hold begins its
// attempt, which is undone and dropped under it (as when its pending
// window passes while it stalls), and another call takes the ID with
// another cart. The first call's commit then finds that call's record:
// it must answer ErrOrderMismatch and give its own lines back, not claim
// the other call's committed attempt as its own and answer nil.
func TestAtomic_twoPhase_undoneAttemptClaimsNoOther(t *testing.T) {
	rdb := backendstest.RedisClient(t)
	prefix := redistest.Prefix(t, rdb)
	a, b := newOrders(rdb, prefix, true), newOrders(rdb, prefix, true)
	ctx := t.Context()
	stockAll(t, a, 10, "a", "b")
	taken := false
	a.hook = func(point string) error {
		if point != "begun" || taken {
			return nil
		}
		taken = true
		if err := rdb.Del(ctx, a.orderKey("o")).Err(); err != nil {
			return err
		}
		return b.Hold(ctx, "o", time.Minute, line("a", 2))
	}
	if err := a.Hold(ctx, "o", time.Minute, line("b", 3)); !errors.Is(err, stockguard.ErrOrderMismatch) {
		t.Errorf("Hold of another cart under an ID another call took = %v, want ErrOrderMismatch", err)
	}
	if !taken {
		t.Fatal("the hook never ran")
	}
	info, err := b.Order(ctx, "o")
	if err != nil {
		t.Fatal(err)
	}
	if info.State != stockguard.OrderHeld || len(info.Lines) != 1 || info.Lines[0] != line("a", 2) {
		t.Errorf("Order = %v %v, want held a:2", info.State, info.Lines)
	}
	wantLevels(t, a, map[string]int64{"a": 8, "b": 10})
}
