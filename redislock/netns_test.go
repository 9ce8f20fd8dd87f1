package redislock

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/stockguard/stockguard"
	"github.com/stockguard/stockguard/internal/netns"
	"github.com/stockguard/stockguard/internal/redistest"
)

// netnsReadTimeout is the first client's read timeout, and netnsCut how
// long the link drops every packet: longer, so that the caller leaves
// while the kernel still holds its script.
const (
	netnsReadTimeout = 500 * time.Millisecond
	netnsCut         = 2 * time.Second
)

// Issue 47's kernel-retransmission case, over a real TCP stack with no
// proxy: Redis runs in a network namespace (root only, STOCKGUARD_NETNS=1;
// scripts/soak.sh netns). An order's first attempt is sent while the link
// drops every packet; its caller's read times out and go-redis closes the
// connection, whose kernel keeps the script and retransmits it. The
// repeat, over a path the cut does not touch, is refused (no units); the
// unit comes back; the link heals and the retransmitted script reaches
// Redis. The order must not be recorded.
func TestAtomic_netnsRetransmission(t *testing.T) {
	for _, m := range orderModes {
		t.Run(m.name, func(t *testing.T) {
			ns := netns.New(t)
			addr, sock := ns.StartRedis(t)
			direct := redis.NewClient(&redis.Options{Network: "unix", Addr: sock})
			t.Cleanup(func() { direct.Close() })
			through := redis.NewClient(&redis.Options{Addr: addr, PoolSize: 1, ReadTimeout: netnsReadTimeout, MaxRetries: -1})
			t.Cleanup(func() { through.Close() })
			prefix := redistest.Prefix(t, direct)
			first, repeat := newOrders(through, prefix, m.twoPhase), newOrders(direct, prefix, m.twoPhase)
			ctx := t.Context()
			if err := repeat.SetStock(ctx, "s", 0); err != nil {
				t.Fatal(err)
			}
			if err := repeat.SetStock(ctx, "z", 1); err != nil {
				t.Fatal(err)
			}
			// One order through the link first: the connection is open
			// and the scripts are loaded, so the order below is sent at
			// once, on that connection.
			if err := first.Take(ctx, "warm", line("z", 1)); err != nil {
				t.Fatal(err)
			}
			if n := linkClients(t, direct, ns.HostIP); n != 1 {
				t.Fatalf("%d connections from %s before the cut, want 1", n, ns.HostIP)
			}

			ns.Cut(t)
			cut := time.Now()
			firstErr := first.Take(ctx, "x", line("s", 1))
			if !errors.Is(firstErr, stockguard.ErrOutcomeUnknown) {
				t.Fatalf("the first attempt, sent into the cut link, answered %v; want ErrOutcomeUnknown after the %v read timeout", firstErr, netnsReadTimeout)
			}
			repeatErr := repeat.Take(ctx, "x", line("s", 1))
			if !errors.Is(repeatErr, stockguard.ErrInsufficientStock) {
				t.Fatalf("the repeat answered %v, want ErrInsufficientStock", repeatErr)
			}
			if err := repeat.SetStock(ctx, "s", 1); err != nil {
				t.Fatal(err)
			}
			if n := linkClients(t, direct, ns.HostIP); n != 1 {
				t.Fatalf("%d connections from %s on Redis after the caller left, want 1: the kernel holds nothing to retransmit", n, ns.HostIP)
			}
			time.Sleep(time.Until(cut.Add(netnsCut)))
			ns.Heal(t)
			healed := time.Now()
			// The connection's FIN follows the script: once Redis has
			// closed it, it has read and run the script.
			for linkClients(t, direct, ns.HostIP) > 0 {
				if time.Since(healed) > time.Minute {
					t.Fatalf("the first attempt's connection is still open on Redis a minute after the link healed")
				}
				time.Sleep(20 * time.Millisecond)
			}
			delivered := time.Since(healed).Round(time.Millisecond)
			switch info, err := repeat.Order(ctx, "x"); {
			case err == nil:
				t.Fatalf("issue 47, kernel retransmission: order x is recorded (%v %v), though its repeat was refused (%v) and its first attempt answered %v; "+
					"the first attempt's script, held by the kernel while the link was cut for %v, ran when it was retransmitted, within %v of the heal",
					info.State, info.Lines, repeatErr, firstErr, netnsCut, delivered)
			case !errors.Is(err, stockguard.ErrUnknownOrder):
				t.Fatalf("Order(x): %v", err)
			}
			if n, err := repeat.Stock(ctx, "s"); err != nil || n != 1 {
				t.Fatalf("Stock(s) = %d, %v after the order was refused and the unit came back; want 1", n, err)
			}
		})
	}
}

// linkClients counts the connections Redis has from host.
func linkClients(t *testing.T, rdb *redis.Client, host string) int {
	t.Helper()
	list, err := rdb.ClientList(t.Context()).Result()
	if err != nil {
		t.Fatal(err)
	}
	return strings.Count(list, " addr="+host+":")
}
