package backends

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// The private Sentinel topology's settings. A master that does not answer
// its Sentinels for SentinelDownAfter is down; two of three Sentinels agree
// (the quorum) and one of them promotes the most advanced replica, in
// about three seconds in all. SentinelDownAfter is at least a second's lag
// (Link.Hold, which delays the master's replies to the Sentinels' pings
// too) plus a Sentinel's ping period (1 s), so that a lagging master is
// not taken for a dead one.
const (
	SentinelMasterName      = "stockguard"
	SentinelCount           = 3
	SentinelQuorum          = 2
	SentinelDownAfter       = 2 * time.Second
	SentinelFailoverTimeout = 5 * time.Second
)

// Environment variables naming a running Sentinel deployment.
const (
	EnvRedisSentinel       = "STOCKGUARD_REDIS_SENTINEL"        // addr1,addr2,addr3
	EnvRedisSentinelMaster = "STOCKGUARD_REDIS_SENTINEL_MASTER" // default SentinelMasterName
)

// Sentinel is a Redis master with replicas watched by Sentinels that fail
// over to a replica when the master dies. A private one (SourceLocal)
// also holds its processes: the data nodes, each behind a Link that its
// peers (replicas, Sentinels) go through and its clients do not, and the
// Sentinels.
type Sentinel struct {
	MasterName string
	Addrs      []string // the Sentinels' host:port
	Source     Source
	Nodes      []*SentinelNode // the data nodes, the first started as master; nil unless local
	Sentinels  []*Redis        // the Sentinel processes; nil unless local

	close func() error
}

// SentinelNode is one data node of a private Sentinel topology.
type SentinelNode struct {
	*Redis
	// Link is the node's network towards its peers: Sentinels and
	// replicas know the node as Link.Addr.
	Link *Link
}

// Close stops what this package started.
func (s *Sentinel) Close() error {
	if s.close == nil {
		return nil
	}
	return s.close()
}

// Dial is the clients' dialer: it reaches a node that the Sentinels name
// by its Link address directly, so that cutting a node's Link partitions
// it from its peers but not from its clients — the split-brain case.
// Other addresses (the Sentinels, a deployment not started here) are
// dialled as they are.
func (s *Sentinel) Dial(ctx context.Context, network, addr string) (net.Conn, error) {
	for _, n := range s.Nodes {
		if n.Link.Addr == addr {
			addr = n.Addr
			break
		}
	}
	var d net.Dialer
	return d.DialContext(ctx, network, addr)
}

// Options returns go-redis failover options for s with pool connections.
func (s *Sentinel) Options(pool int) *redis.FailoverOptions {
	return &redis.FailoverOptions{
		MasterName:    s.MasterName,
		SentinelAddrs: slices.Clone(s.Addrs),
		Dialer:        s.Dial,
		PoolSize:      pool,
	}
}

// Client returns a new client that follows the Sentinels' master; the
// caller closes it.
func (s *Sentinel) Client(pool int) *redis.Client {
	return redis.NewFailoverClient(s.Options(pool))
}

// MasterAddr returns the master's address on which every Sentinel agrees
// (for a private topology, a node's Link.Addr).
func (s *Sentinel) MasterAddr(ctx context.Context) (string, error) {
	var agreed string
	for _, a := range s.Addrs {
		c := redis.NewSentinelClient(&redis.Options{Addr: a, Dialer: s.Dial})
		hp, err := c.GetMasterAddrByName(ctx, s.MasterName).Result()
		c.Close()
		if err != nil {
			return "", fmt.Errorf("backends: sentinel %s: %w", a, err)
		}
		if len(hp) != 2 {
			return "", fmt.Errorf("backends: sentinel %s: master %v", a, hp)
		}
		addr := net.JoinHostPort(hp[0], hp[1])
		if agreed != "" && addr != agreed {
			return "", fmt.Errorf("backends: the sentinels disagree on the master: %s and %s", agreed, addr)
		}
		agreed = addr
	}
	return agreed, nil
}

// Master returns the node the Sentinels agree is the master.
func (s *Sentinel) Master(ctx context.Context) (*SentinelNode, error) {
	addr, err := s.MasterAddr(ctx)
	if err != nil {
		return nil, err
	}
	for _, n := range s.Nodes {
		if n.Link.Addr == addr {
			return n, nil
		}
	}
	return nil, fmt.Errorf("backends: the sentinels name %s, not a node started here", addr)
}

// WaitPromoted waits until every Sentinel names a master other than old
// (a Link address) and that master says it is one.
func (s *Sentinel) WaitPromoted(ctx context.Context, old string) (*SentinelNode, error) {
	var last error
	for {
		n, err := s.Master(ctx)
		if err == nil && n.Link.Addr == old {
			err = fmt.Errorf("still %s", old)
		}
		if err == nil {
			err = role(ctx, n, "master")
		}
		if err == nil {
			return n, nil
		}
		last = err
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("backends: no master promoted in place of %s: %w (last: %v)", old, ctx.Err(), last)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// WaitHealthy waits until the topology can fail over again: every node
// runs, the Sentinels agree on the master, every other node replicates it
// with its link up, and every Sentinel sees those replicas healthy and
// knows the other Sentinels.
func (s *Sentinel) WaitHealthy(ctx context.Context) error {
	var last error
	for {
		if last = s.healthy(ctx); last == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("backends: sentinel topology not healthy: %w (last: %v)", ctx.Err(), last)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func (s *Sentinel) healthy(ctx context.Context) error {
	m, err := s.Master(ctx)
	if err != nil {
		return err
	}
	if err := role(ctx, m, "master"); err != nil {
		return err
	}
	for _, n := range s.Nodes {
		if n == m {
			continue
		}
		info, err := nodeInfo(ctx, n)
		if err != nil {
			return err
		}
		if !strings.Contains(info, "master_link_status:up") || !strings.Contains(info, "master_port:"+port(m.Link.Addr)+"\r") {
			return fmt.Errorf("node %s does not replicate %s yet", n.Link.Addr, m.Link.Addr)
		}
	}
	for _, a := range s.Addrs {
		c := redis.NewSentinelClient(&redis.Options{Addr: a})
		reps, err := c.Replicas(ctx, s.MasterName).Result()
		if err == nil {
			var others []map[string]string
			others, err = c.Sentinels(ctx, s.MasterName).Result()
			if err == nil && len(others) < len(s.Addrs)-1 {
				err = fmt.Errorf("sentinel %s knows %d other sentinels", a, len(others))
			}
		}
		c.Close()
		if err != nil {
			return err
		}
		ok := 0
		for _, r := range reps {
			// Only "slave": not down, not disconnected. The Sentinel's
			// own master-link-status lags by its INFO period (10 s), and
			// the node's INFO above already says its link is up.
			if r["flags"] == "slave" {
				ok++
			}
		}
		if ok < len(s.Nodes)-1 {
			return fmt.Errorf("sentinel %s sees %d healthy replicas of %d", a, ok, len(s.Nodes)-1)
		}
	}
	return nil
}

// Restore brings a killed node back on its data, makes it a replica of the
// master the Sentinels promoted, and waits until the topology is healthy
// again. A Sentinel would convert the node itself, but only once its INFO
// poll (every 10 s) notices it; an operator's REPLICAOF does the same at
// once, and a node left as it was (not killed: partitioned, then healed)
// is converted the same way.
func (s *Sentinel) Restore(ctx context.Context, n *SentinelNode) error {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	if !n.Proc.Alive() {
		if err := n.Proc.Respawn(ctx, n.ping); err != nil {
			return err
		}
	}
	m, err := s.Master(ctx)
	if err != nil {
		return err
	}
	if m != n {
		c := redis.NewClient(&redis.Options{Addr: n.Addr})
		err := c.ReplicaOf(ctx, "127.0.0.1", port(m.Link.Addr)).Err()
		c.Close()
		if err != nil {
			return fmt.Errorf("backends: %s replicaof %s: %w", n.Link.Addr, m.Link.Addr, err)
		}
	}
	return s.WaitHealthy(ctx)
}

func role(ctx context.Context, n *SentinelNode, want string) error {
	info, err := nodeInfo(ctx, n)
	if err != nil {
		return err
	}
	if !strings.Contains(info, "role:"+want+"\r") {
		return fmt.Errorf("node %s is not a %s yet", n.Link.Addr, want)
	}
	return nil
}

func nodeInfo(ctx context.Context, n *SentinelNode) (string, error) {
	c := redis.NewClient(&redis.Options{Addr: n.Addr, MaxRetries: -1})
	defer c.Close()
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	return c.Info(ctx, "replication").Result()
}

func port(addr string) string {
	_, p, _ := net.SplitHostPort(addr)
	return p
}

// StartLocalSentinel starts a private Sentinel topology from redis-server
// on PATH: a master, replicas replicating it, each behind its Link, and
// SentinelCount Sentinels (redis-server sentinel.conf --sentinel)
// monitoring it, and waits until it is healthy (see WaitHealthy). extra
// arguments go to every data node's command line.
func StartLocalSentinel(ctx context.Context, replicas int, extra ...string) (_ *Sentinel, err error) {
	if replicas < 1 {
		return nil, fmt.Errorf("backends: a sentinel topology needs at least one replica, not %d", replicas)
	}
	if _, err := exec.LookPath("redis-server"); err != nil {
		return nil, fmt.Errorf("backends: no redis-server on PATH: %w", err)
	}
	s := &Sentinel{MasterName: SentinelMasterName, Source: SourceLocal}
	var closers []func() error
	s.close = func() error {
		var errs []error
		for i := len(closers) - 1; i >= 0; i-- {
			errs = append(errs, closers[i]())
		}
		return errors.Join(errs...)
	}
	defer func() {
		if err != nil {
			s.Close()
		}
	}()
	var masterLink string
	for i := range 1 + replicas {
		k, err := listenLink()
		if err != nil {
			return nil, err
		}
		closers = append(closers, k.Close)
		// No delay before a full sync: a replica joining after a failover
		// syncs at once rather than 5 s later waiting for company.
		args := append([]string{"--replica-announce-ip", "127.0.0.1", "--replica-announce-port", port(k.Addr), "--repl-diskless-sync-delay", "0"}, extra...)
		if i == 0 {
			masterLink = k.Addr
		} else {
			args = append(args, "--replicaof", "127.0.0.1", port(masterLink))
		}
		r, err := StartLocalRedis(ctx, args...)
		if err != nil {
			return nil, err
		}
		closers = append(closers, r.Close)
		k.connect(r.Addr)
		s.Nodes = append(s.Nodes, &SentinelNode{Redis: r, Link: k})
	}
	for range SentinelCount {
		r, err := startSentinelProcess(ctx, masterLink)
		if err != nil {
			return nil, err
		}
		closers = append(closers, r.Close)
		s.Sentinels = append(s.Sentinels, r)
		s.Addrs = append(s.Addrs, r.Addr)
	}
	wctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	if err := s.WaitHealthy(wctx); err != nil {
		return nil, err
	}
	return s, nil
}

// startSentinelProcess starts one Sentinel monitoring the master at
// masterLink, from a config file in its own temp dir (a Sentinel rewrites
// its config as it learns the topology).
func startSentinelProcess(ctx context.Context, masterLink string) (*Redis, error) {
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		return nil, err
	}
	var lastErr error
	for range 3 { // another process may grab the free port first
		p, err := freePort()
		if err != nil {
			return nil, err
		}
		dir, err := os.MkdirTemp("", "stockguard-sentinel-")
		if err != nil {
			return nil, err
		}
		name := SentinelMasterName
		conf := fmt.Sprintf(`port %d
bind 127.0.0.1
protected-mode no
daemonize no
dir %s
loglevel warning
sentinel monitor %s 127.0.0.1 %s %d
sentinel down-after-milliseconds %s %d
sentinel failover-timeout %s %d
sentinel parallel-syncs %s 1
`, p, dir, name, port(masterLink), SentinelQuorum, name, SentinelDownAfter.Milliseconds(), name, SentinelFailoverTimeout.Milliseconds(), name)
		file := filepath.Join(dir, "sentinel.conf")
		if err := os.WriteFile(file, []byte(conf), 0o644); err != nil {
			os.RemoveAll(dir)
			return nil, err
		}
		proc, err := start(dir, p, bin, file, "--sentinel")
		if err != nil {
			os.RemoveAll(dir)
			return nil, err
		}
		r := &Redis{Addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(p)), Source: SourceLocal, Proc: proc, close: proc.Close}
		wctx, cancel := context.WithTimeout(ctx, 15*time.Second)
		lastErr = proc.waitReady(wctx, r.ping)
		cancel()
		if lastErr == nil {
			return r, nil
		}
		proc.Close()
	}
	return nil, lastErr
}

// ResolveSentinel finds a Sentinel deployment: the Sentinels
// STOCKGUARD_REDIS_SENTINEL names (comma-separated host:port, watching the
// master STOCKGUARD_REDIS_SENTINEL_MASTER, default SentinelMasterName),
// else a private topology of one master, one replica and SentinelCount
// Sentinels from redis-server on PATH. There is no docker way: the nodes
// and Sentinels tell clients the addresses they announce, which inside
// containers behind mapped ports are not the host's (it would take host
// networking or ports fixed before the containers start). The caller
// closes it.
func ResolveSentinel(ctx context.Context) (*Sentinel, error) {
	return resolve(ctx, "redis sentinel", EnvRedisSentinel, func(ctx context.Context, list string) (*Sentinel, error) {
		s := &Sentinel{MasterName: SentinelMasterName, Source: SourceEnv}
		if name := os.Getenv(EnvRedisSentinelMaster); name != "" {
			s.MasterName = name
		}
		for _, a := range strings.Split(list, ",") {
			if a = strings.TrimSpace(a); a != "" {
				s.Addrs = append(s.Addrs, a)
			}
		}
		if len(s.Addrs) == 0 {
			return nil, fmt.Errorf("%s=%q names no sentinel", EnvRedisSentinel, list)
		}
		if _, err := s.MasterAddr(ctx); err != nil {
			return nil, err
		}
		return s, nil
	}, func(ctx context.Context) (*Sentinel, error) { return StartLocalSentinel(ctx, 1) }, func(context.Context) (*Sentinel, error) {
		return nil, errors.New("backends: no docker way for a sentinel topology (the nodes announce addresses that mapped container ports hide); set " + EnvRedisSentinel + " or put redis-server on PATH")
	})
}
