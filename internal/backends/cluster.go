package backends

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// Cluster is a local Redis Cluster of masters only, each a private
// redis-server with a slice of the 16384 slots.
type Cluster struct {
	Nodes []*Redis
}

// Addrs returns the masters' addresses, for redis.ClusterOptions.Addrs.
func (c *Cluster) Addrs() []string {
	addrs := make([]string, len(c.Nodes))
	for i, n := range c.Nodes {
		addrs[i] = n.Addr
	}
	return addrs
}

// Client returns a new cluster client; the caller closes it.
func (c *Cluster) Client() *redis.ClusterClient {
	return redis.NewClusterClient(&redis.ClusterOptions{Addrs: c.Addrs(), PoolSize: 128})
}

// Close stops every node.
func (c *Cluster) Close() error {
	var errs []error
	for _, n := range c.Nodes {
		errs = append(errs, n.Close())
	}
	return errors.Join(errs...)
}

// StartLocalCluster starts masters redis-server processes with cluster mode
// on, splits the slots evenly between them, joins them with CLUSTER MEET and
// waits until every node reports cluster_state:ok.
func StartLocalCluster(ctx context.Context, masters int) (*Cluster, error) {
	return startLocalCluster(ctx, "redis-server", masters)
}

// startLocalCluster is StartLocalCluster with server, redis-server or
// valkey-server.
func startLocalCluster(ctx context.Context, server string, masters int) (*Cluster, error) {
	if masters < 1 {
		return nil, fmt.Errorf("backends: a cluster needs at least one master, not %d", masters)
	}
	c := &Cluster{}
	for range masters {
		// nodes.conf is relative to --dir, which is the node's own temp dir.
		n, err := startLocalRedisLike(ctx, server, "--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf",
			"--cluster-node-timeout", "5000", "--cluster-require-full-coverage", "yes")
		if err != nil {
			c.Close()
			return nil, err
		}
		c.Nodes = append(c.Nodes, n)
	}
	if err := c.form(ctx); err != nil {
		c.Close()
		return nil, err
	}
	return c, nil
}

func (c *Cluster) form(ctx context.Context) error {
	const slots = 16384
	clients := make([]*redis.Client, len(c.Nodes))
	for i, n := range c.Nodes {
		clients[i] = n.Client()
		defer clients[i].Close()
	}
	per := slots / len(c.Nodes)
	for i, cl := range clients {
		lo, hi := i*per, (i+1)*per-1
		if i == len(clients)-1 {
			hi = slots - 1
		}
		if err := cl.Do(ctx, "CLUSTER", "ADDSLOTSRANGE", lo, hi).Err(); err != nil {
			return fmt.Errorf("backends: cluster addslots on %s: %w", c.Nodes[i].Addr, err)
		}
	}
	first := clients[0]
	for _, n := range c.Nodes[1:] {
		host, port, _ := strings.Cut(n.Addr, ":")
		p, _ := strconv.Atoi(port)
		if err := first.ClusterMeet(ctx, host, strconv.Itoa(p)).Err(); err != nil {
			return fmt.Errorf("backends: cluster meet %s: %w", n.Addr, err)
		}
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	for {
		ok := true
		for _, cl := range clients {
			info, err := cl.ClusterInfo(ctx).Result()
			if err != nil || !strings.Contains(info, "cluster_state:ok") ||
				!strings.Contains(info, "cluster_known_nodes:"+strconv.Itoa(len(c.Nodes))+"\r") {
				ok = false
				break
			}
		}
		if ok {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("backends: cluster of %d not ok: %w", len(c.Nodes), ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
}
