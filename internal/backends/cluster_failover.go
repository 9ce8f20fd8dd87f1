package backends

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// The failover of a private cluster started WithClusterLinks: a node is
// known to the cluster by its Link's address, and a master's failure is
// detected and its replica promoted by the cluster itself (no Sentinel).

// all returns every node started, masters and replicas.
func (c *Cluster) all() []*Redis {
	nodes := append([]*Redis(nil), c.Nodes...)
	for _, rs := range c.Replicas {
		nodes = append(nodes, rs...)
	}
	return nodes
}

// announced returns the address the cluster knows n by: its Link's, else
// its own.
func (c *Cluster) announced(n *Redis) string {
	if k := c.links[n]; k != nil {
		return k.Addr
	}
	return n.Addr
}

// Busiest returns the live master holding the most keys: the shard a
// failover of the stock hurts most.
func (c *Cluster) Busiest(ctx context.Context) (*Redis, error) {
	var best *Redis
	var most int64 = -1
	for _, n := range c.all() {
		if n.Proc != nil && !n.Proc.Alive() {
			continue
		}
		cl := redis.NewClient(&redis.Options{Addr: n.Addr, MaxRetries: -1})
		info, err := cl.Info(ctx, "replication").Result()
		var keys int64
		if err == nil {
			keys, err = cl.DBSize(ctx).Result()
		}
		cl.Close()
		if err != nil {
			return nil, fmt.Errorf("backends: cluster node %s: %w", n.Addr, err)
		}
		if strings.Contains(info, "role:master\r") && keys > most {
			best, most = n, keys
		}
	}
	if best == nil {
		return nil, errors.New("backends: no live cluster master")
	}
	return best, nil
}

// clusterNode is a line of CLUSTER NODES.
type clusterNode struct {
	addr   string // ip:port, without @bus
	flags  string
	serves bool // holds slots
}

// clusterNodes returns what the node at addr says of the cluster, and
// whether it says cluster_state:ok.
func clusterNodes(ctx context.Context, addr string) ([]clusterNode, bool, error) {
	cl := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1})
	defer cl.Close()
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	info, err := cl.ClusterInfo(ctx).Result()
	if err != nil {
		return nil, false, err
	}
	text, err := cl.ClusterNodes(ctx).Result()
	if err != nil {
		return nil, false, err
	}
	var out []clusterNode
	for line := range strings.Lines(text) {
		f := strings.Fields(line)
		if len(f) < 8 {
			continue
		}
		a, _, _ := strings.Cut(f[1], "@")
		out = append(out, clusterNode{addr: a, flags: f[2], serves: len(f) > 8})
	}
	return out, strings.Contains(info, "cluster_state:ok"), nil
}

// WaitPromoted waits until every live node says the cluster is ok without
// old serving slots: a replica of old has been elected and took them.
func (c *Cluster) WaitPromoted(ctx context.Context, old *Redis) error {
	gone := c.announced(old)
	return retry(ctx, func() error {
		for _, n := range c.all() {
			if n == old || (n.Proc != nil && !n.Proc.Alive()) {
				continue
			}
			nodes, ok, err := clusterNodes(ctx, n.Addr)
			if err != nil {
				return err
			}
			if !ok {
				return fmt.Errorf("node %s: cluster not ok", n.Addr)
			}
			for _, cn := range nodes {
				if cn.addr == gone && cn.serves {
					return fmt.Errorf("node %s: %s still serves slots", n.Addr, gone)
				}
			}
		}
		return nil
	})
}

// Restore brings a killed node back on its nodes.conf (no data: a node
// of a private cluster has no persistence) and waits until the cluster is
// healthy again: the node, its slots now another's, rejoins as that
// master's replica by itself; every node is ok, none failing, every
// replica linked to its master and every shard serving slots has one.
func (c *Cluster) Restore(ctx context.Context, n *Redis) error {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	if n.Proc != nil && !n.Proc.Alive() {
		if err := n.Proc.Respawn(ctx, n.ping); err != nil {
			return err
		}
	}
	return retry(ctx, func() error { return c.healthy(ctx) })
}

// healthy returns nil when every node is ok and sees no node failing, and
// every replica is linked to its master, else why not.
func (c *Cluster) healthy(ctx context.Context) error {
	replicas := 0
	for _, n := range c.all() {
		nodes, ok, err := clusterNodes(ctx, n.Addr)
		if err != nil {
			return err
		}
		if !ok {
			return fmt.Errorf("node %s: cluster not ok", n.Addr)
		}
		for _, cn := range nodes {
			if strings.Contains(cn.flags, "fail") || strings.Contains(cn.flags, "handshake") {
				return fmt.Errorf("node %s: %s is %s", n.Addr, cn.addr, cn.flags)
			}
		}
		cl := redis.NewClient(&redis.Options{Addr: n.Addr, MaxRetries: -1})
		info, err := cl.Info(ctx, "replication").Result()
		cl.Close()
		if err != nil {
			return err
		}
		if strings.Contains(info, "role:slave\r") {
			if !strings.Contains(info, "master_link_status:up") || strings.Contains(info, "master_sync_in_progress:1") {
				return fmt.Errorf("node %s: replica not in sync", n.Addr)
			}
			replicas++
		}
	}
	if want := len(c.all()) - len(c.Nodes); replicas < want {
		return fmt.Errorf("%d replicas in sync, want %d", replicas, want)
	}
	return nil
}
