package backends

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// EnvRedisCluster names a running Redis Cluster with replicas: some of its
// nodes' host:port, comma-separated (the client learns the rest).
const EnvRedisCluster = "STOCKGUARD_REDIS_CLUSTER"

// ClusterMasters is how many masters a private cluster with replicas has,
// each with one replica.
const ClusterMasters = 3

// ResolveReplicatedCluster finds a Redis Cluster whose masters have
// replicas: the nodes STOCKGUARD_REDIS_CLUSTER names, else a private one
// of ClusterMasters masters with a replica each, from redis-server on
// PATH. There is no docker way: cluster nodes announce the addresses they
// bind, which mapped container ports hide. The caller closes it.
func ResolveReplicatedCluster(ctx context.Context) (*Cluster, error) {
	return resolve(ctx, "redis cluster", EnvRedisCluster, func(ctx context.Context, list string) (*Cluster, error) {
		c := &Cluster{}
		for _, a := range strings.Split(list, ",") {
			if a = strings.TrimSpace(a); a != "" {
				c.Nodes = append(c.Nodes, &Redis{Addr: a, Source: SourceEnv})
			}
		}
		if len(c.Nodes) == 0 {
			return nil, fmt.Errorf("%s=%q names no node", EnvRedisCluster, list)
		}
		cl := c.Client()
		defer cl.Close()
		ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		info, err := cl.ClusterInfo(ctx).Result()
		if err != nil {
			return nil, err
		}
		if !strings.Contains(info, "cluster_state:ok") {
			return nil, fmt.Errorf("cluster at %s is not ok", list)
		}
		return c, clusterHasReplicas(ctx, c)
	}, func(ctx context.Context) (*Cluster, error) {
		c, err := StartLocalCluster(ctx, ClusterMasters, WithClusterReplicas(1))
		if err != nil {
			return nil, err
		}
		// The masters learn their replicas by gossip, after the replicas
		// are linked: until then CLUSTER SHARDS lists none.
		wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		for {
			err := clusterHasReplicas(wctx, c)
			if err == nil {
				return c, nil
			}
			select {
			case <-wctx.Done():
				c.Close()
				return nil, fmt.Errorf("backends: private cluster: %w (%w)", err, wctx.Err())
			case <-time.After(100 * time.Millisecond):
			}
		}
	}, func(context.Context) (*Cluster, error) {
		return nil, errors.New("backends: no docker way for a cluster with replicas (its nodes announce addresses that mapped container ports hide); set " + EnvRedisCluster + " or put redis-server on PATH")
	})
}

// clusterHasReplicas fails unless every node of c says that every shard
// serving slots has an online replica: a cluster without them cannot fail
// over, which is what it is for here. Each node answers from what gossip
// told it, so each is asked.
func clusterHasReplicas(ctx context.Context, c *Cluster) error {
	for _, n := range c.Nodes {
		cl := redis.NewClient(&redis.Options{Addr: n.Addr})
		shards, err := cl.ClusterShards(ctx).Result()
		cl.Close()
		if err != nil {
			return fmt.Errorf("%s: %w", n.Addr, err)
		}
		for _, s := range shards {
			if len(s.Slots) == 0 {
				continue
			}
			if !slices.ContainsFunc(s.Nodes, func(n redis.Node) bool { return n.Role == "replica" && n.Health == "online" }) {
				return fmt.Errorf("%s: slots %d-%d have no online replica", n.Addr, s.Slots[0].Start, s.Slots[0].End)
			}
		}
	}
	return nil
}
