package redistest

import (
	"testing"

	"github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/maintnotifications"

	"github.com/stockguard/stockguard/internal/netgate"
)

// LateClient returns a client of the Redis at addr whose connections go
// through l, closed when t ends. A call gives up on its connection at its
// context's deadline (ContextTimeoutEnabled): a request held past it
// reaches Redis after its caller left. A call without a deadline waits
// out every hold (the default ReadTimeout, 3 s, is longer).
func LateClient(t testing.TB, addr string, l *netgate.Late) *redis.Client {
	rdb := redis.NewClient(&redis.Options{Addr: addr, PoolSize: 128, Dialer: l.Dial,
		ContextTimeoutEnabled: true})
	t.Cleanup(func() { rdb.Close() })
	return rdb
}

// LateCluster returns a client of the Redis Cluster at addrs, dialling
// through dial behind l, closed when t ends; its timeouts are
// LateClient's. Maintenance notifications are off, as in
// backends.Cluster's clients.
func LateCluster(t testing.TB, addrs []string, dial netgate.DialFunc, l *netgate.Late) *redis.ClusterClient {
	rdb := redis.NewClusterClient(&redis.ClusterOptions{Addrs: addrs, PoolSize: 128, Dialer: l.DialVia(dial),
		ContextTimeoutEnabled:    true,
		MaintNotificationsConfig: &maintnotifications.Config{Mode: maintnotifications.ModeDisabled}})
	t.Cleanup(func() { rdb.Close() })
	return rdb
}
