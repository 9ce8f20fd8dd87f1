package faults

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/jmoiron/sqlx"
	"github.com/redis/go-redis/v9"

	"github.com/stockguard/stockguard/bench"
	"github.com/stockguard/stockguard/bench/mysqltargets"
	"github.com/stockguard/stockguard/bench/pgtargets"
	"github.com/stockguard/stockguard/bench/redistargets"
	"github.com/stockguard/stockguard/bench/replicatargets"
	"github.com/stockguard/stockguard/bench/valkeytargets"
	"github.com/stockguard/stockguard/internal/backends"
)

// Env is the private servers the faults strike, with a proxy in front of
// each server that holds stock, and the direct admin connections the
// faults use. Close stops them all.
type Env struct {
	servers map[string]*server           // by bench backend name: the stock's servers
	voters  map[string][]*backends.Redis // by Redlock backend name: the other voters, not struck
	closers []func() error
}

// redisLike is a Redis-protocol backend the Env can start: its stock
// server's and its Redlock voters' bench backend names, and how to start a
// server.
type redisLike struct {
	name, redlock, product string
	start                  func(ctx context.Context, extra ...string) (*backends.Redis, error)
}

var redisLikes = []redisLike{
	{redistargets.Name, redistargets.RedlockName, "Redis", backends.StartLocalRedis},
	{valkeytargets.Name, valkeytargets.RedlockName, "Valkey", backends.StartLocalValkey},
}

// readyAttempt bounds one readiness check of a server coming back. On a
// loaded machine (a race-detected client, load 20) a connection to a
// recovering PostgreSQL can take more than a second, and a check that gives
// up sooner may never see the server ready; the respawn's own deadline
// bounds the whole wait.
const readyAttempt = 10 * time.Second

// server is one private server a fault can strike.
type server struct {
	backend string
	proc    *backends.Process
	proxy   *Proxy
	// ready reports whether the server answers, over a direct connection.
	ready func(context.Context) error
	// crash kills the server as a machine crash would; nil: proc.Kill.
	crash func() error
	// stop is the signal of a clean shutdown; 0: SIGTERM.
	stop syscall.Signal
	// killConns makes the server close its clients' connections.
	killConns func(context.Context) (int, error)
	// readOnly makes the server refuse (or hold) writes for d.
	readOnly func(ctx context.Context, d time.Duration) error
	// client is how targets reach it: through the proxy, pools of pool
	// connections; close closes it.
	client func(pool int) (conn any, close func() error, err error)
	desc   string
	// topo is the deployment with replicas and failover the server is, nil
	// for a single server; proc, proxy, killConns and readOnly are then
	// nil, since its master changes.
	topo topology
}

// replicaBackends are the backends whose servers are deployments with
// replicas and automatic failover.
var replicaBackends = []string{replicatargets.SentinelName, replicatargets.ClusterName}

// Backends lists the bench backends an Env can provide. TiDB is not among
// them: its private server keeps its data in memory, so a restart could not
// keep it.
func Backends() []string {
	out := []string{mysqltargets.Name, pgtargets.Name}
	for _, r := range redisLikes {
		out = append(out, r.name, r.redlock)
	}
	return append(out, replicaBackends...)
}

// Start starts the private servers the named bench backends need (see
// Backends): a durable MariaDB or MySQL (innodb_flush_log_at_trx_commit=1,
// binary log synced at commit), a Redis (Valkey) with an append-only file
// fsynced at every write (appendfsync always), so that a restart keeps
// every acknowledged write, and the other Redlock voters (without
// persistence; they are never struck). Each stock server gets a proxy.
func Start(ctx context.Context, need ...string) (_ *Env, err error) {
	e := &Env{servers: map[string]*server{}, voters: map[string][]*backends.Redis{}}
	defer func() {
		if err != nil {
			e.Close()
		}
	}()
	for _, n := range need {
		if !slices.Contains(Backends(), n) {
			return nil, fmt.Errorf("faults: no private servers for backend %q", n)
		}
	}
	var mu sync.Mutex
	add := func(c func() error) {
		mu.Lock()
		e.closers = append(e.closers, c)
		mu.Unlock()
	}
	var wg sync.WaitGroup
	var errs []error
	fail := func(err error) {
		mu.Lock()
		errs = append(errs, err)
		mu.Unlock()
	}
	if slices.Contains(need, mysqltargets.Name) {
		wg.Go(func() {
			s, err := startMySQL(ctx, add)
			if err != nil {
				fail(err)
				return
			}
			mu.Lock()
			e.servers[mysqltargets.Name] = s
			mu.Unlock()
		})
	}
	if slices.Contains(need, pgtargets.Name) {
		wg.Go(func() {
			s, err := startPostgres(ctx, add)
			if err != nil {
				fail(err)
				return
			}
			mu.Lock()
			e.servers[pgtargets.Name] = s
			mu.Unlock()
		})
	}
	for _, rl := range redisLikes {
		if slices.Contains(need, rl.name) || slices.Contains(need, rl.redlock) {
			wg.Go(func() {
				s, err := startRedis(ctx, rl, add)
				if err != nil {
					fail(err)
					return
				}
				mu.Lock()
				e.servers[rl.name] = s
				mu.Unlock()
			})
		}
		if slices.Contains(need, rl.redlock) {
			wg.Go(func() {
				for range redistargets.RedlockVoters - 1 {
					r, err := rl.start(ctx)
					if err != nil {
						fail(fmt.Errorf("faults: %s voter: %w", rl.redlock, err))
						return
					}
					add(r.Close)
					mu.Lock()
					e.voters[rl.redlock] = append(e.voters[rl.redlock], r)
					mu.Unlock()
				}
			})
		}
	}
	if slices.Contains(need, replicatargets.SentinelName) {
		wg.Go(func() {
			s, err := startSentinel(ctx, add)
			if err != nil {
				fail(err)
				return
			}
			mu.Lock()
			e.servers[replicatargets.SentinelName] = s
			mu.Unlock()
		})
	}
	if slices.Contains(need, replicatargets.ClusterName) {
		wg.Go(func() {
			s, err := startCluster(ctx, add)
			if err != nil {
				fail(err)
				return
			}
			mu.Lock()
			e.servers[replicatargets.ClusterName] = s
			mu.Unlock()
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return e, nil
}

// Close stops the servers and the proxies.
func (e *Env) Close() error {
	var errs []error
	for i := len(e.closers) - 1; i >= 0; i-- {
		errs = append(errs, e.closers[i]())
	}
	return errors.Join(errs...)
}

// Servers describes the servers, for reports.
func (e *Env) Servers() []string {
	var out []string
	for _, n := range Backends() {
		if s := e.servers[n]; s != nil {
			out = append(out, s.desc)
		}
	}
	for _, rl := range redisLikes {
		for i, v := range e.voters[rl.redlock] {
			out = append(out, VoterDesc(rl.redlock, rl.product, i+2, v.Addr))
		}
	}
	return out
}

// VoterDesc describes the vote-th Redlock voter of backend redlock (the
// first is the stock's server), a product ("Redis", "Valkey") at addr.
func VoterDesc(redlock, product string, vote int, addr string) string {
	return fmt.Sprintf("%s: voter %d of %d, %s at %s (no persistence, not struck)", redlock, vote, redistargets.RedlockVoters, product, addr)
}

// has reports whether e provides every backend of needs.
func (e *Env) has(needs []string) error {
	for _, n := range needs {
		if e.isRedlock(n) {
			if len(e.voters[n]) < redistargets.RedlockVoters-1 {
				return fmt.Errorf("%w: %s (no private voters)", bench.ErrMissingBackend, n)
			}
			continue
		}
		if e.servers[n] == nil {
			return fmt.Errorf("%w: %s (no private server for it)", bench.ErrMissingBackend, n)
		}
	}
	return nil
}

// open connects to the backends of needs, the stock's servers through
// their proxies, and returns the connections as targets expect them.
func (e *Env) open(needs []string, pool int) (bench.Servers, func() error, error) {
	conns := bench.Servers{}
	var closers []func() error
	closeAll := func() error {
		var errs []error
		for _, c := range closers {
			errs = append(errs, c())
		}
		return errors.Join(errs...)
	}
	for _, n := range needs {
		if e.isRedlock(n) {
			var voters []redis.UniversalClient
			for _, v := range e.voters[n] {
				c := redis.NewClient(&redis.Options{Addr: v.Addr, PoolSize: pool})
				closers = append(closers, c.Close)
				voters = append(voters, c)
			}
			conns[n] = voters
			continue
		}
		conn, c, err := e.servers[n].client(pool)
		if err != nil {
			closeAll()
			return nil, nil, err
		}
		closers = append(closers, c)
		conns[n] = conn
	}
	return conns, closeAll, nil
}

// isRedlock reports whether backend n is the Redlock voters of a
// Redis-protocol backend.
func (e *Env) isRedlock(n string) bool {
	return slices.ContainsFunc(redisLikes, func(r redisLike) bool { return r.redlock == n })
}

func startMySQL(ctx context.Context, add func(func() error)) (*server, error) {
	m, err := backends.StartLocalMySQL(ctx, backends.Durable())
	if err != nil {
		return nil, fmt.Errorf("faults: private mysql: %w", err)
	}
	add(m.Close)
	cfg := m.Config()
	proxy, err := Listen(cfg.Addr)
	if err != nil {
		return nil, err
	}
	add(proxy.Close)
	admin, err := sql.Open("mysql", cfg.FormatDSN())
	if err != nil {
		return nil, err
	}
	admin.SetMaxOpenConns(2)
	add(admin.Close)
	var version string
	if err := admin.QueryRowContext(ctx, "SELECT VERSION()").Scan(&version); err != nil {
		return nil, fmt.Errorf("faults: private mysql: %w", err)
	}
	return &server{
		backend: mysqltargets.Name, proc: m.Proc, proxy: proxy,
		desc: fmt.Sprintf("mysql: %s at %s via proxy %s (durable: innodb_flush_log_at_trx_commit=1, sync_binlog=1)", version, cfg.Addr, proxy.Addr),
		ready: func(ctx context.Context) error {
			ctx, cancel := context.WithTimeout(ctx, readyAttempt)
			defer cancel()
			return admin.PingContext(ctx)
		},
		killConns: func(ctx context.Context) (int, error) { return killMySQLConns(ctx, admin) },
		readOnly:  func(ctx context.Context, d time.Duration) error { return readLock(ctx, admin, d) },
		client: func(pool int) (any, func() error, error) {
			c := m.Config()
			c.Addr, c.InterpolateParams = proxy.Addr, true
			db, err := sqlx.Open("mysql", c.FormatDSN())
			if err != nil {
				return nil, nil, err
			}
			db.SetMaxOpenConns(pool)
			db.SetMaxIdleConns(pool)
			return db, db.Close, nil
		},
	}, nil
}

// erUnknownThread is the reply to KILL of a connection that has just ended.
const erUnknownThread = 1094

// killMySQLConns kills every client connection but the admin's own, as an
// administrator or a proxy's idle timeout would.
func killMySQLConns(ctx context.Context, admin *sql.DB) (int, error) {
	conn, err := admin.Conn(ctx)
	if err != nil {
		return 0, err
	}
	defer conn.Close()
	rows, err := conn.QueryContext(ctx, "SELECT ID FROM information_schema.PROCESSLIST "+
		"WHERE ID <> CONNECTION_ID() AND USER = SUBSTRING_INDEX(CURRENT_USER(), '@', 1)")
	if err != nil {
		return 0, err
	}
	var ids []int64
	for rows.Next() {
		var id int64
		if err := rows.Scan(&id); err != nil {
			rows.Close()
			return 0, err
		}
		ids = append(ids, id)
	}
	if err := errors.Join(rows.Err(), rows.Close()); err != nil {
		return 0, err
	}
	n := 0
	for _, id := range ids {
		_, err := conn.ExecContext(ctx, fmt.Sprintf("KILL CONNECTION %d", id))
		var me *mysql.MySQLError
		switch {
		case err == nil:
			n++
		case errors.As(err, &me) && me.Number == erUnknownThread:
		default:
			return n, err
		}
	}
	return n, nil
}

// readLock holds FLUSH TABLES WITH READ LOCK for d: every write waits for
// the global read lock (or fails at the caller's deadline) until UNLOCK
// TABLES.
func readLock(ctx context.Context, admin *sql.DB, d time.Duration) error {
	conn, err := admin.Conn(ctx)
	if err != nil {
		return err
	}
	defer conn.Close()
	if _, err := conn.ExecContext(ctx, "FLUSH TABLES WITH READ LOCK"); err != nil {
		return err
	}
	sleep(ctx, d)
	// Unlocked even when ctx ended: the window must close.
	uctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	_, err = conn.ExecContext(uctx, "UNLOCK TABLES")
	return err
}

func startRedis(ctx context.Context, rl redisLike, add func(func() error)) (*server, error) {
	r, err := rl.start(ctx, "--appendonly", "yes", "--appendfsync", "always")
	if err != nil {
		return nil, fmt.Errorf("faults: private %s: %w", rl.name, err)
	}
	add(r.Close)
	proxy, err := Listen(r.Addr)
	if err != nil {
		return nil, err
	}
	add(proxy.Close)
	admin := redis.NewClient(&redis.Options{Addr: r.Addr, PoolSize: 2})
	add(admin.Close)
	info, err := admin.Info(ctx, "server").Result()
	if err != nil {
		return nil, fmt.Errorf("faults: private %s: %w", rl.name, err)
	}
	version := "?"
	for line := range strings.Lines(info) {
		line = strings.TrimSpace(line)
		if v, ok := strings.CutPrefix(line, strings.ToLower(rl.product)+"_version:"); ok {
			version = v
		} else if v, ok := strings.CutPrefix(line, "redis_version:"); ok && version == "?" {
			version = v
		}
	}
	return &server{
		backend: rl.name, proc: r.Proc, proxy: proxy,
		desc: fmt.Sprintf("%s: %s %s at %s via proxy %s (appendonly yes, appendfsync always)", rl.name, rl.product, version, r.Addr, proxy.Addr),
		ready: func(ctx context.Context) error {
			ctx, cancel := context.WithTimeout(ctx, readyAttempt)
			defer cancel()
			return admin.Ping(ctx).Err()
		},
		killConns: func(ctx context.Context) (int, error) {
			n, err := admin.ClientKillByFilter(ctx, "TYPE", "normal", "SKIPME", "yes").Result()
			return int(n), err
		},
		readOnly: func(ctx context.Context, d time.Duration) error {
			// With no replica attached, min-replicas-to-write 1 makes Redis
			// refuse every write (NOREPLICAS), scripts' at their first write.
			if err := admin.ConfigSet(ctx, "min-replicas-to-write", "1").Err(); err != nil {
				return err
			}
			sleep(ctx, d)
			uctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
			defer cancel()
			return admin.ConfigSet(uctx, "min-replicas-to-write", "0").Err()
		},
		client: func(pool int) (any, func() error, error) {
			c := redis.NewClient(&redis.Options{Addr: proxy.Addr, PoolSize: pool})
			return redis.UniversalClient(c), c.Close, nil
		},
	}, nil
}

// startSentinel starts a private Sentinel topology: a master and a replica
// without persistence (what a failover keeps is what the replica had, not
// what a disk had) and three Sentinels. Clients reach the master directly;
// the replica and the Sentinels through the master's Link, which the
// failover faults hold and cut.
func startSentinel(ctx context.Context, add func(func() error)) (*server, error) {
	topo, err := backends.StartLocalSentinel(ctx, 1)
	if err != nil {
		return nil, fmt.Errorf("faults: private sentinel topology: %w", err)
	}
	add(topo.Close)
	admin := topo.Client(2)
	add(admin.Close)
	info, err := admin.Info(ctx, "server").Result()
	if err != nil {
		return nil, fmt.Errorf("faults: private sentinel topology: %w", err)
	}
	version := "?"
	for line := range strings.Lines(info) {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "redis_version:"); ok {
			version = v
		}
	}
	var nodes []string
	for _, n := range topo.Nodes {
		nodes = append(nodes, n.Addr+" (peers via "+n.Link.Addr+")")
	}
	return &server{
		backend: replicatargets.SentinelName, topo: sentinelTopo{topo},
		desc: fmt.Sprintf("%s: Redis %s, master and replica %s, Sentinels %s (quorum %d, down-after %v), no persistence",
			replicatargets.SentinelName, version, strings.Join(nodes, ", "), strings.Join(topo.Addrs, ","),
			backends.SentinelQuorum, backends.SentinelDownAfter),
		ready: func(ctx context.Context) error {
			ctx, cancel := context.WithTimeout(ctx, readyAttempt)
			defer cancel()
			return admin.Ping(ctx).Err()
		},
		client: func(pool int) (any, func() error, error) {
			c := topo.Client(pool)
			return redis.UniversalClient(c), c.Close, nil
		},
	}, nil
}

// startCluster starts a private Cluster with replicas:
// backends.ClusterMasters masters with a replica each, without persistence,
// each node behind a Link (backends.WithClusterLinks) that carries its
// replication and that the failover fault holds and cuts; clients and the
// cluster bus reach the nodes directly.
func startCluster(ctx context.Context, add func(func() error)) (*server, error) {
	c, err := backends.StartLocalCluster(ctx, backends.ClusterMasters, backends.WithClusterReplicas(1), backends.WithClusterLinks())
	if err != nil {
		return nil, fmt.Errorf("faults: private cluster: %w", err)
	}
	add(c.Close)
	admin := c.ClientPool(2)
	add(admin.Close)
	first := c.Nodes[0].Client()
	info, err := first.Info(ctx, "server").Result()
	first.Close()
	if err != nil {
		return nil, fmt.Errorf("faults: private cluster: %w", err)
	}
	version := "?"
	for line := range strings.Lines(info) {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "redis_version:"); ok {
			version = v
		}
	}
	var nodes []string
	for i, m := range c.Nodes {
		nodes = append(nodes, fmt.Sprintf("%s (peers via %s) with replica %s (via %s)",
			m.Addr, c.Link(m).Addr, c.Replicas[i][0].Addr, c.Link(c.Replicas[i][0]).Addr))
	}
	return &server{
		backend: replicatargets.ClusterName, topo: clusterTopo{c},
		desc: fmt.Sprintf("%s: Redis %s, masters %s, cluster-node-timeout %v, no persistence",
			replicatargets.ClusterName, version, strings.Join(nodes, ", "), backends.ClusterNodeTimeout),
		ready: func(ctx context.Context) error {
			ctx, cancel := context.WithTimeout(ctx, readyAttempt)
			defer cancel()
			return admin.Ping(ctx).Err()
		},
		client: func(pool int) (any, func() error, error) {
			cl := c.ClientPool(pool)
			return redis.UniversalClient(cl), cl.Close, nil
		},
	}, nil
}

// sleep waits for d or until ctx ends.
func sleep(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}
