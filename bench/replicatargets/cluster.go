package replicatargets

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/stockguard/stockguard/bench"
	"github.com/stockguard/stockguard/bench/redistargets"
	"github.com/stockguard/stockguard/internal/backends"
)

// ClusterName is the Cluster-with-replicas backend's name in targets'
// Needs and in bench.Servers.
const ClusterName = "redis-cluster"

// ClusterBackend is a Redis Cluster whose masters have replicas, holding
// the stock: the nodes -redis-cluster names, else those
// STOCKGUARD_REDIS_CLUSTER names, else a private cluster of three masters
// with a replica each from redis-server on PATH.
var ClusterBackend = bench.Backend{
	Name: ClusterName,
	About: "Redis Cluster, 3 masters with a replica each, holding the stock: -redis-cluster, else " +
		backends.EnvRedisCluster + ", else a private cluster from redis-server on PATH",
	Flags: func(fs *flag.FlagSet) bench.Opener {
		list := fs.String("redis-cluster", "", "Redis Cluster node addresses host:port, comma-separated, holding the redis-cluster-* stock (default: resolved, see Backends)")
		return bench.Opener{
			Check: func() error {
				for _, a := range splitList(*list) {
					if !strings.Contains(a, ":") {
						return fmt.Errorf("-redis-cluster %q: want host:port,…", *list)
					}
				}
				return nil
			},
			Open: func(ctx context.Context, oc bench.OpenConfig) (*bench.Opened, error) {
				if oc.RTT != 0 {
					return nil, bench.ErrNoRoute(ClusterName)
				}
				pool := oc.Pool
				if addrs := splitList(*list); len(addrs) > 0 {
					return openCluster(ctx, addrs, "-redis-cluster", pool)
				}
				rctx, cancel := context.WithTimeout(ctx, resolveTimeout)
				c, err := backends.ResolveReplicatedCluster(rctx)
				cancel()
				if err != nil {
					return nil, err
				}
				var source string
				if len(c.Nodes) > 0 {
					source = string(c.Nodes[0].Source)
				}
				o, err := openCluster(ctx, c.Addrs(), source, pool)
				if err != nil {
					c.Close()
					return nil, err
				}
				closeConn := o.Close
				o.Close = func() error { return errors.Join(closeConn(), c.Close()) }
				return o, nil
			},
		}
	},
}

// openCluster opens a cluster client of pool connections per node on the
// cluster at addrs and describes it for reports.
func openCluster(ctx context.Context, addrs []string, source string, pool int) (*bench.Opened, error) {
	rdb := redis.NewClusterClient(&redis.ClusterOptions{Addrs: addrs, PoolSize: pool})
	pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	info, err := rdb.Info(pctx, "server").Result()
	if err != nil {
		rdb.Close()
		return nil, fmt.Errorf("redis cluster at %v: %w", addrs, err)
	}
	shards, err := rdb.ClusterShards(pctx).Result()
	if err != nil {
		rdb.Close()
		return nil, fmt.Errorf("redis cluster at %v: %w", addrs, err)
	}
	srv := bench.Server{Backend: ClusterName, Product: "Redis", Version: "?", Source: source,
		Addr: "cluster " + strings.Join(addrs, ","), CPU: clusterCPU(rdb), CPUFrom: "INFO cpu of every node"}
	for line := range strings.Lines(info) {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "redis_version:"); ok {
			srv.Version = v
		}
	}
	masters, replicas := 0, 0
	for _, s := range shards {
		for _, n := range s.Nodes {
			if n.Role == "master" {
				masters++
			} else {
				replicas++
			}
		}
	}
	srv.Settings = fmt.Sprintf("masters=%d replicas=%d", masters, replicas)
	return &bench.Opened{
		Conn: redis.UniversalClient(rdb), Servers: []bench.Server{srv}, Close: rdb.Close,
		Args: []string{"-redis-cluster", strings.Join(addrs, ",")},
	}, nil
}

// clusterCPU reads the processor time of every node of the cluster,
// masters and replicas, through INFO cpu, added up.
func clusterCPU(rdb *redis.ClusterClient) func(context.Context) (time.Duration, error) {
	return func(ctx context.Context) (time.Duration, error) {
		var mu sync.Mutex
		var sum time.Duration
		err := rdb.ForEachShard(ctx, func(ctx context.Context, node *redis.Client) error {
			d, err := redistargets.InfoCPU(node)(ctx)
			if err != nil {
				return fmt.Errorf("%s: %w", node.Options().Addr, err)
			}
			mu.Lock()
			sum += d
			mu.Unlock()
			return nil
		})
		return sum, err
	}
}
