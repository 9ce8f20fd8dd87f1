package redislock

import (
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/stockguard/stockguard/internal/netns"
	"github.com/stockguard/stockguard/internal/redistest"
)

// Issue 47's kernel-retransmission case, over a real TCP stack with no
// proxy: Redis runs in a network namespace (root only, STOCKGUARD_NETNS=1;
// scripts/soak.sh netns). An order's first attempt is sent while the link
// drops every packet; its caller's read times out and go-redis closes the
// connection, whose kernel keeps the script and retransmits it when the
// link heals, after the repeat (over a Unix socket) was refused and the
// unit came back. The order must not be recorded.
func TestAtomic_netnsRetransmission(t *testing.T) {
	for _, m := range orderModes {
		t.Run(m.name, func(t *testing.T) {
			ns := netns.New(t)
			addr, sock := ns.StartRedis(t)
			direct := redis.NewClient(&redis.Options{Network: "unix", Addr: sock})
			t.Cleanup(func() { direct.Close() })
			through := redis.NewClient(&redis.Options{Addr: addr, PoolSize: 1, ReadTimeout: netns.Leave, MaxRetries: -1})
			t.Cleanup(func() { through.Close() })
			prefix := redistest.Prefix(t, direct)
			ns.RefusedRepeat(t, newOrders(through, prefix, m.twoPhase), newOrders(direct, prefix, m.twoPhase), func() int {
				list, err := direct.ClientList(t.Context()).Result()
				if err != nil {
					t.Fatal(err)
				}
				return strings.Count(list, " addr="+ns.HostIP+":")
			})
		})
	}
}
