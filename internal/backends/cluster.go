package backends

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/maintnotifications"
)

// Cluster is a local Redis Cluster: masters, each a private redis-server
// with a slice of the 16384 slots, and, when started WithClusterReplicas,
// replicas following them.
type Cluster struct {
	Nodes    []*Redis   // the masters as started (a failover may promote a replica since)
	Replicas [][]*Redis // Replicas[i] were started replicating Nodes[i]; nil without replicas

	links map[*Redis]*Link // WithClusterLinks: each node's Link
}

// ClusterNodeTimeout is a private cluster's cluster-node-timeout: a master
// that does not answer the cluster bus for it is failing, and its replica
// starts an election about a second later (Redis's delay of 500 ms plus up
// to 500 ms at random), so an automatic failover takes about six seconds.
const ClusterNodeTimeout = 5 * time.Second

// ClusterOption configures StartLocalCluster.
type ClusterOption func(*clusterConfig)

type clusterConfig struct {
	replicas int
	links    bool
}

// WithClusterReplicas gives every master n replicas (CLUSTER REPLICATE),
// so that the cluster can fail over. Default: none.
func WithClusterReplicas(n int) ClusterOption {
	return func(c *clusterConfig) { c.replicas = n }
}

// WithClusterLinks puts every node behind a Link, as the private Sentinel
// topology does: a node announces its Link's address to the cluster, so
// that its replicas follow it through the Link (Hold lags them, Cut drops
// what was held), while the cluster bus (gossip, failure detection,
// election) and the clients (see Dial) reach it directly. Default: none.
func WithClusterLinks() ClusterOption {
	return func(c *clusterConfig) { c.links = true }
}

// Link returns n's Link, nil unless started WithClusterLinks.
func (c *Cluster) Link(n *Redis) *Link { return c.links[n] }

// Dial is the clients' dialer: it reaches a node that the cluster names by
// its Link address directly, so that holding or cutting a node's Link
// lags or partitions its replicas, never its clients. Other addresses are
// dialled as they are.
func (c *Cluster) Dial(ctx context.Context, network, addr string) (net.Conn, error) {
	for n, k := range c.links {
		if k.Addr == addr {
			addr = n.Addr
			break
		}
	}
	var d net.Dialer
	return d.DialContext(ctx, network, addr)
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
	return c.ClientPool(128)
}

// ClientPool returns a new cluster client of pool connections per node,
// dialling through Dial; the caller closes it. Maintenance notifications
// (a Redis Enterprise feature) are off: each node client would start a
// goroutine for them, and after a failover some outlive Close, which a
// fault run's leak check reports.
func (c *Cluster) ClientPool(pool int) *redis.ClusterClient {
	return redis.NewClusterClient(&redis.ClusterOptions{Addrs: c.Addrs(), PoolSize: pool, Dialer: c.Dial,
		MaintNotificationsConfig: &maintnotifications.Config{Mode: maintnotifications.ModeDisabled}})
}

// Close stops every node.
func (c *Cluster) Close() error {
	var errs []error
	for _, rs := range c.Replicas {
		for _, r := range rs {
			errs = append(errs, r.Close())
		}
	}
	for _, n := range c.Nodes {
		errs = append(errs, n.Close())
	}
	for _, k := range c.links {
		errs = append(errs, k.Close())
	}
	return errors.Join(errs...)
}

// StartLocalCluster starts masters redis-server processes with cluster mode
// on, splits the slots evenly between them, joins them with CLUSTER MEET and
// waits until every node reports cluster_state:ok; WithClusterReplicas
// adds replicas and waits until each is linked to its master.
func StartLocalCluster(ctx context.Context, masters int, opts ...ClusterOption) (*Cluster, error) {
	return startLocalCluster(ctx, "redis-server", masters, opts...)
}

// startLocalCluster is StartLocalCluster with server, redis-server or
// valkey-server.
func startLocalCluster(ctx context.Context, server string, masters int, opts ...ClusterOption) (*Cluster, error) {
	var cfg clusterConfig
	for _, o := range opts {
		o(&cfg)
	}
	if masters < 1 {
		return nil, fmt.Errorf("backends: a cluster needs at least one master, not %d", masters)
	}
	if cfg.replicas < 0 {
		return nil, fmt.Errorf("backends: a cluster master cannot have %d replicas", cfg.replicas)
	}
	c := &Cluster{}
	if cfg.links {
		c.links = map[*Redis]*Link{}
	}
	start := func() (*Redis, error) {
		// nodes.conf is relative to --dir, which is the node's own temp dir.
		// A master syncs a new replica at once, not after the default 5s.
		args := []string{"--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf",
			"--cluster-node-timeout", strconv.Itoa(int(ClusterNodeTimeout / time.Millisecond)), "--cluster-require-full-coverage", "yes",
			"--repl-diskless-sync-delay", "0"}
		if !cfg.links {
			return startLocalRedisLike(ctx, server, args...)
		}
		k, err := listenLink()
		if err != nil {
			return nil, err
		}
		// The node announces its Link as its address and its own bus port
		// (default port+10000) as the bus's: only the data port is linked.
		r, err := startLocalRedisPort(ctx, server, func(port int) []string {
			return append(args, "--cluster-announce-ip", "127.0.0.1", "--cluster-announce-port", linkPort(k),
				"--cluster-announce-bus-port", strconv.Itoa(port+10000))
		})
		if err != nil {
			k.Close()
			return nil, err
		}
		k.connect(r.Addr)
		c.links[r] = k
		return r, nil
	}
	for range masters {
		n, err := start()
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
	if cfg.replicas == 0 {
		return c, nil
	}
	c.Replicas = make([][]*Redis, masters)
	for i := range c.Nodes {
		for range cfg.replicas {
			r, err := start()
			if err != nil {
				c.Close()
				return nil, err
			}
			c.Replicas[i] = append(c.Replicas[i], r)
		}
	}
	if err := c.attachReplicas(ctx); err != nil {
		c.Close()
		return nil, err
	}
	return c, nil
}

// attachReplicas introduces every replica to the cluster, makes it
// replicate its master and waits until the link is up and every node knows
// every other.
func (c *Cluster) attachReplicas(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	first := c.Nodes[0].Client()
	defer first.Close()
	total := len(c.Nodes)
	for i, rs := range c.Replicas {
		mc := c.Nodes[i].Client()
		id, err := mc.ClusterMyID(ctx).Result()
		mc.Close()
		if err != nil {
			return fmt.Errorf("backends: cluster myid on %s: %w", c.Nodes[i].Addr, err)
		}
		for _, r := range rs {
			total++
			host, port, _ := strings.Cut(r.Addr, ":")
			if err := first.ClusterMeet(ctx, host, port).Err(); err != nil {
				return fmt.Errorf("backends: cluster meet %s: %w", r.Addr, err)
			}
			rc := r.Client()
			// The replica learns the master's id through gossip, some
			// heartbeats after the MEET: until then REPLICATE says unknown node.
			err := retry(ctx, func() error { return rc.ClusterReplicate(ctx, id).Err() })
			rc.Close()
			if err != nil {
				return fmt.Errorf("backends: %s cluster replicate %s: %w", r.Addr, c.Nodes[i].Addr, err)
			}
		}
		if err := waitSynced(ctx, c.Nodes[i], rs, false); err != nil {
			return err
		}
	}
	return c.waitKnown(ctx, total)
}

// waitKnown waits until every node, masters and replicas, reports
// cluster_state:ok and knows total nodes.
func (c *Cluster) waitKnown(ctx context.Context, total int) error {
	nodes := append([]*Redis(nil), c.Nodes...)
	for _, rs := range c.Replicas {
		nodes = append(nodes, rs...)
	}
	clients := make([]*redis.Client, len(nodes))
	for i, n := range nodes {
		clients[i] = n.Client()
		defer clients[i].Close()
	}
	return retry(ctx, func() error {
		for i, cl := range clients {
			info, err := cl.ClusterInfo(ctx).Result()
			if err != nil {
				return err
			}
			if !strings.Contains(info, "cluster_state:ok") || !strings.Contains(info, "cluster_known_nodes:"+strconv.Itoa(total)+"\r") {
				return fmt.Errorf("node %s: not ok or does not know all %d nodes", nodes[i].Addr, total)
			}
		}
		return nil
	})
}

// retry calls f every 100ms until it succeeds or ctx ends.
func retry(ctx context.Context, f func() error) error {
	for {
		err := f()
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w (last: %v)", ctx.Err(), err)
		case <-time.After(100 * time.Millisecond):
		}
	}
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

// linkPort returns k's port.
func linkPort(k *Link) string { return port(k.Addr) }
