package faults

import (
	"context"
	"fmt"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stockguard/stockguard"
	"github.com/stockguard/stockguard/bench"
	"github.com/stockguard/stockguard/bench/mysqltargets"
	"github.com/stockguard/stockguard/bench/redistargets"
	"github.com/stockguard/stockguard/internal/backends"
	"github.com/stockguard/stockguard/internal/memorders"
)

// broken wraps the in-memory reference Orders with one way of breaking
// the contract, switched on while the fault is on: the first call while it
// is on breaks, and every 20th after. broke, shared by every instance,
// counts the calls broken, so that the fault lasts until one was.
type broken struct {
	*memorders.Store
	on    *atomic.Bool
	broke *atomic.Int64
	calls atomic.Int64
	how   string
}

// breaks reports whether this call, made while the fault is on, breaks.
func (b *broken) breaks() bool {
	if b.broke.Load() > 0 && b.calls.Add(1)%20 != 0 {
		return false
	}
	b.broke.Add(1)
	return true
}

func (b *broken) Decrement(ctx context.Context, sku string, qty int64) error {
	if b.how == "busy while down" && b.on.Load() {
		b.broke.Add(1)
		return fmt.Errorf("%w: lock not obtained", stockguard.ErrContention)
	}
	if !b.on.Load() || b.how == "takes an order, forgets its ID" || !b.breaks() {
		return b.Store.Decrement(ctx, sku, qty)
	}
	switch b.how {
	case "acks without taking":
		return nil
	case "takes, says the context ended":
		if err := b.Store.Decrement(ctx, sku, qty); err != nil {
			return err
		}
		return context.DeadlineExceeded
	case "panics":
		panic("broken: panics")
	case "plain error":
		return fmt.Errorf("connection reset by peer")
	case "leaks a goroutine":
		go func() { select {} }()
	case "unknown sku":
		return stockguard.ErrUnknownSKU
	}
	return b.Store.Decrement(ctx, sku, qty)
}

func (b *broken) Take(ctx context.Context, id string, lines ...stockguard.Line) error {
	if b.how == "takes an order, forgets its ID" && b.on.Load() && b.breaks() {
		for _, l := range lines {
			if err := b.Store.Decrement(ctx, l.SKU, l.Qty); err != nil {
				return err
			}
		}
		return stockguard.ErrOutcomeUnknown
	}
	// As a mysqllock write whose caller left: the caller is told the
	// outcome is unknown when its context ends, and the write lands a
	// moment later, up to the last calls of the run.
	if b.how == "an unknown order lands late" && b.calls.Add(1)%20 == 0 {
		<-ctx.Done()
		go func() {
			time.Sleep(lateWrite)
			b.Store.Take(context.WithoutCancel(ctx), id, lines...)
		}()
		return stockguard.ErrOutcomeUnknown
	}
	return b.Store.Take(ctx, id, lines...)
}

// TestRun_catches runs the suite on broken in-memory strategies and checks
// that each breakage is reported — and that the reference is not.
func TestRun_catches(t *testing.T) {
	tests := []struct {
		how  string
		want string // in the problems; "" for none
	}{
		{"correct", ""},
		{"an unknown order lands late", ""},
		{"acks without taking", "oversold"},
		{"takes, says the context ended", "lost"},
		{"takes an order, forgets its ID", "lost"},
		{"busy while down", "ErrContention while the server was down"},
		{"panics", "panic: broken: panics"},
		{"plain error", "outside the contract"},
		{"leaks a goroutine", "goroutines after Close"},
		{"unknown sku", "ended unknown-sku"},
	}
	for _, tt := range tests {
		t.Run(strings.ReplaceAll(tt.how, " ", "_"), func(t *testing.T) {
			e := memEnv(t, "mem")
			var on atomic.Bool
			var broke atomic.Int64
			mem := memorders.New()
			target := bench.Target{Name: "mem-" + tt.how, Needs: []string{"mem"},
				Open: func(context.Context, bench.Servers, string) (*bench.Store, error) {
					return &bench.Store{New: func() (stockguard.Inventory, error) {
						return &broken{Store: mem, on: &on, broke: &broke, how: tt.how}, nil
					}}, nil
				}}
			// A breakage switched on with the fault lasts until a call
			// broke: however few calls a loaded machine makes meanwhile.
			waitBroken := tt.want != "" && tt.how != "an unknown order lands late"
			fault := Fault{Name: "fake-restart", span: half(0),
				strike: func(ctx context.Context, s *scene, span time.Duration) (int, error) {
					s.down.Store(int64(s.since()))
					on.Store(true)
					sleep(ctx, span)
					for waitBroken && broke.Load() == 0 && ctx.Err() == nil {
						sleep(ctx, time.Millisecond)
					}
					on.Store(false)
					s.back.Store(int64(s.since()))
					return 1, nil
				}}
			rep := runSelf(t, e, target, fault, tt.want)
			// What the report counts as gone must be what the store ends
			// with, once every write that was still on its way has landed.
			time.Sleep(lateWrite + 100*time.Millisecond)
			var gone int64
			for i, sku := range skus {
				n, err := mem.Stock(t.Context(), sku)
				if err != nil {
					t.Fatal(err)
				}
				gone += [2]int64{hotStock, scarceStock}[i] - n
			}
			if gone != rep.Gone {
				t.Errorf("the report counts %d units gone, the store ends with %d gone", rep.Gone, gone)
			}
			if !rep.Orders || rep.Ops == 0 {
				t.Errorf("Orders %v, %d calls: the run did not take orders", rep.Orders, rep.Ops)
			}
		})
	}
}

// TestRun_peersReconnectingIsNoLeak: a failover changes how many peer
// connections (Sentinels, replicas) the topology's Links forward — the
// Sentinels reconnect to a restarted node when they get to it, before or
// during the next run. Those forwarding goroutines are the deployment's,
// not the target's, and a run during which peers connect is not a leak.
func TestRun_peersReconnectingIsNoLeak(t *testing.T) {
	node, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { node.Close() })
	go func() {
		for {
			c, err := node.Accept()
			if err != nil {
				return
			}
			t.Cleanup(func() { c.Close() })
		}
	}()
	link, err := backends.NewLink(node.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { link.Close() })
	e := memEnv(t, "mem")
	mem := memorders.New()
	target := bench.Target{Name: "mem-peers", Needs: []string{"mem"},
		Open: func(context.Context, bench.Servers, string) (*bench.Store, error) {
			return &bench.Store{New: func() (stockguard.Inventory, error) { return mem, nil }}, nil
		}}
	fault := Fault{Name: "fake-reconnect", span: half(0),
		strike: func(ctx context.Context, s *scene, span time.Duration) (int, error) {
			// Three Sentinels, each with a command and a pub/sub connection.
			for range 6 {
				c, err := net.Dial("tcp", link.Addr)
				if err != nil {
					return 0, err
				}
				t.Cleanup(func() { c.Close() })
			}
			sleep(ctx, span)
			return 1, nil
		}}
	runSelf(t, e, target, fault, "")
}

// lateWrite is how long after its caller was answered a write of the
// "lands late" breakage applies: within abandonedGrace, as mysqllock's.
const lateWrite = 700 * time.Millisecond

// record is a store of record behind a front, broken one way: it answers
// Order from the front's ledger, but misses or doubles some orders.
type record struct {
	stockguard.Orders
	how string
}

func (r record) Order(ctx context.Context, id string) (stockguard.OrderInfo, error) {
	info, err := r.Orders.Order(ctx, id)
	if err != nil || !strings.HasSuffix(id, "7") {
		return info, err
	}
	switch r.how {
	case "misses orders":
		return stockguard.OrderInfo{}, fmt.Errorf("%w: %s", stockguard.ErrUnknownOrder, id)
	case "doubles lines":
		for i := range info.Lines {
			info.Lines[i].Qty *= 2
		}
	}
	return info, nil
}

// counting counts the orders taken.
type counting struct {
	*memorders.Store
	taken *atomic.Int64
}

func (c counting) Take(ctx context.Context, id string, lines ...stockguard.Line) error {
	err := c.Store.Take(ctx, id, lines...)
	if err == nil {
		c.taken.Add(1)
	}
	return err
}

// TestRun_ledgerCatches runs the suite on an in-memory target of two tiers
// whose store of record is broken and checks that the run's reading of the
// record reports it — and that a complete record passes, every acknowledged
// order read back.
func TestRun_ledgerCatches(t *testing.T) {
	tests := []struct {
		how  string
		want string // in the problems; "" for none
	}{
		{"complete", ""},
		{"misses orders", "the store of record does not have it"},
		{"doubles lines", "in the store of record, asked"},
		{"tiers differ", "the tiers after the run: drift"},
	}
	for _, tt := range tests {
		t.Run(strings.ReplaceAll(tt.how, " ", "_"), func(t *testing.T) {
			// Named as the servers of tiered-mysql, which the faults of the
			// back strike.
			front, back := redistargets.Name, mysqltargets.Name
			e := memEnv(t, front, back)
			mem := memorders.New()
			var taken atomic.Int64
			target := bench.Target{Name: "mem-" + tt.how, Needs: []string{front, back},
				Open: func(context.Context, bench.Servers, string) (*bench.Store, error) {
					return &bench.Store{
						New: func() (stockguard.Inventory, error) { return counting{mem, &taken}, nil },
						Ledger: func(context.Context, ...string) (stockguard.Orders, error) {
							if tt.how == "tiers differ" {
								return nil, fmt.Errorf("drift of 3 units on %s", scarceSKU)
							}
							return record{mem, tt.how}, nil
						},
					}, nil
				}}
			fault := Fault{Name: "fake-back", span: half(0), back: true,
				strike: func(ctx context.Context, s *scene, span time.Duration) (int, error) {
					if s.srv.backend != back {
						return 0, fmt.Errorf("struck %s, not the back", s.srv.backend)
					}
					sleep(ctx, span)
					return 1, nil
				}}
			rep := runSelf(t, e, target, fault, tt.want)
			if n := taken.Load(); tt.how != "tiers differ" && (n == 0 || rep.Recorded != n) {
				t.Errorf("%d orders read from the record, %d taken", rep.Recorded, n)
			}
		})
	}
}

// memEnv returns an Env of servers named names for in-memory targets:
// always ready, no clients, one proxy to nowhere.
func memEnv(t *testing.T, names ...string) *Env {
	t.Helper()
	proxy, err := Listen("127.0.0.1:1")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { proxy.Close() })
	e := &Env{servers: map[string]*server{}}
	for _, n := range names {
		e.servers[n] = &server{backend: n, proxy: proxy,
			ready:  func(context.Context) error { return nil },
			client: func(int) (any, func() error, error) { return nil, func() error { return nil }, nil },
		}
	}
	return e
}

// runSelf runs target through fault on e, 8 buyers for 400 ms, and checks
// that the run's problems mention want — or, want empty, that there are
// none.
func runSelf(t *testing.T, e *Env, target bench.Target, fault Fault, want string) *Report {
	t.Helper()
	rep, err := Run(t.Context(), e, target, fault, Config{Buyers: 8, Duration: 400 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	got := strings.ToLower(strings.Join(rep.Problems, "\n"))
	switch {
	case want == "" && !rep.OK():
		t.Errorf("a correct target was reported broken: %s\n%s", rep.Audit(), got)
	case want != "" && !strings.Contains(got, strings.ToLower(want)):
		t.Errorf("problems %q do not mention %q", got, want)
	}
	return rep
}
