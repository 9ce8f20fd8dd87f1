// Package replicatargets registers Redis deployments with replicas and
// automatic failover with package bench — "redis-sentinel", a master with
// a replica watched by three Sentinels (flags -redis-sentinel,
// -redis-sentinel-master), and "redis-cluster", a Redis Cluster whose
// masters have a replica each (flag -redis-cluster) — and the Redis
// strategies again on them, each twice: redis-sentinel-<strategy>,
// acknowledging a write once the master applied it (the default), and
// redis-sentinel-<strategy>-ack, once a replica has it too
// (WithReplicaAck(1, AckTimeout)); the same redis-cluster-*. They run only
// when -strategies names them (redis-sentinel-*, redis-cluster-*), or, on
// Sentinel, under the faults that need replicas (stockbench -faults
// failover,partition-master).
//
// Targets find a redis.UniversalClient under "redis-sentinel" (a
// redis.NewFailoverClient, which follows the Sentinels' master) and under
// "redis-cluster" (a redis.ClusterClient) in bench.Servers.
package replicatargets

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/stockguard/stockguard/bench"
	"github.com/stockguard/stockguard/bench/redistargets"
	"github.com/stockguard/stockguard/internal/backends"
	"github.com/stockguard/stockguard/redislock/lock"
)

// SentinelName is the Sentinel backend's name in targets' Needs and in
// bench.Servers.
const SentinelName = "redis-sentinel"

// resolveTimeout bounds finding or starting a topology.
const resolveTimeout = 3 * time.Minute

// SentinelBackend is a Sentinel deployment holding the stock: the
// Sentinels -redis-sentinel names, else those STOCKGUARD_REDIS_SENTINEL
// names, else a private master, replica and three Sentinels from
// redis-server on PATH.
var SentinelBackend = bench.Backend{
	Name: SentinelName,
	About: "Redis master + replica behind 3 Sentinels, holding the stock: -redis-sentinel, else " +
		backends.EnvRedisSentinel + ", else a private topology from redis-server on PATH",
	Flags: func(fs *flag.FlagSet) bench.Opener {
		list := fs.String("redis-sentinel", "", "Sentinel addresses host:port, comma-separated, of the deployment holding the redis-sentinel-* stock (default: resolved, see Backends)")
		name := fs.String("redis-sentinel-master", backends.SentinelMasterName, "the master name the Sentinels of -redis-sentinel watch")
		return bench.Opener{
			Check: func() error {
				for _, a := range splitList(*list) {
					if !strings.Contains(a, ":") {
						return fmt.Errorf("-redis-sentinel %q: want host:port,…", *list)
					}
				}
				if *name == "" {
					return errors.New("-redis-sentinel-master: empty")
				}
				return nil
			},
			Open: func(ctx context.Context, oc bench.OpenConfig) (*bench.Opened, error) {
				if oc.RTT != 0 {
					return nil, bench.ErrNoRoute(SentinelName)
				}
				pool := oc.Pool
				if addrs := splitList(*list); len(addrs) > 0 {
					return OpenSentinel(ctx, &backends.Sentinel{MasterName: *name, Addrs: addrs}, "-redis-sentinel", pool)
				}
				rctx, cancel := context.WithTimeout(ctx, resolveTimeout)
				s, err := backends.ResolveSentinel(rctx)
				cancel()
				if err != nil {
					return nil, err
				}
				o, err := OpenSentinel(ctx, s, string(s.Source), pool)
				if err != nil {
					s.Close()
					return nil, err
				}
				closeConn := o.Close
				o.Close = func() error { return errors.Join(closeConn(), s.Close()) }
				return o, nil
			},
		}
	},
}

func splitList(list string) []string {
	var out []string
	for _, a := range strings.Split(list, ",") {
		if a = strings.TrimSpace(a); a != "" {
			out = append(out, a)
		}
	}
	return out
}

// OpenSentinel opens a failover client of pool connections on s, found
// through source, and describes its master for reports. Close closes the
// client, not s.
func OpenSentinel(ctx context.Context, s *backends.Sentinel, source string, pool int) (*bench.Opened, error) {
	rdb := s.Client(pool)
	pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	info, err := rdb.Info(pctx, "server", "replication").Result()
	if err != nil {
		rdb.Close()
		return nil, fmt.Errorf("redis sentinel master %q via %v: %w", s.MasterName, s.Addrs, err)
	}
	srv := bench.Server{Backend: SentinelName, Product: "Redis", Version: "?", Source: source,
		Addr: "sentinels " + strings.Join(s.Addrs, ",") + " master " + s.MasterName,
		CPU:  redistargets.InfoCPU(rdb), CPUFrom: "INFO cpu of the master (its replicas not counted)"}
	replicas := "?"
	for line := range strings.Lines(info) {
		line = strings.TrimSpace(line)
		if v, ok := strings.CutPrefix(line, "redis_version:"); ok {
			srv.Version = v
		}
		if v, ok := strings.CutPrefix(line, "connected_slaves:"); ok {
			replicas = v
		}
	}
	srv.Settings = "replicas=" + replicas
	return &bench.Opened{
		Conn: redis.UniversalClient(rdb), Servers: []bench.Server{srv}, Close: rdb.Close,
		Args: []string{"-redis-sentinel", strings.Join(s.Addrs, ","), "-redis-sentinel-master", s.MasterName},
	}, nil
}

// acked holds the names of the targets that acknowledge a write only once
// replicas have it.
var acked []string

// Acked reports whether target name waits for a replica's acknowledgement
// (WithReplicaAck) before it acknowledges a write. A target on replicas
// without it is expected to lose acknowledged units in a failover.
func Acked(name string) bool { return slices.Contains(acked, name) }

// RegisterAcked records that target name, registered by another package on
// a deployment of this one, waits for a replica's acknowledgement (see
// Acked). Call it from init, as bench.Register.
func RegisterAcked(name string) { acked = append(acked, name) }

func init() {
	bench.RegisterBackend(SentinelBackend)
	bench.RegisterBackend(ClusterBackend)
	for _, b := range []string{SentinelName, ClusterName} {
		rename := map[string]string{redistargets.Name: b}
		for _, s := range strategies {
			bench.Register(bench.Variant(s.target(false), b+"-"+s.name, rename))
			name := b + "-" + s.name + "-ack"
			bench.Register(bench.Variant(s.target(true), name, rename))
			acked = append(acked, name)
		}
	}
}

// Locks returns the lock client target name would lock with on rdb under
// key prefix prefix: lock.New, with a replica's acknowledgement when
// Acked(name). The failover faults take locks with it beside the buyers,
// to check that no fencing token is handed out twice across a failover.
func Locks(name string, rdb redis.UniversalClient, prefix string) (*lock.Client, error) {
	opts := []lock.Option{lock.WithPrefix(prefix)}
	if Acked(name) {
		opts = append(opts, lock.WithReplicaAck(1, AckTimeout))
	}
	return lock.New(rdb, opts...)
}
