package redistargets

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/stockguard/stockguard/bench"
	"github.com/stockguard/stockguard/internal/backends"
)

// The backends' names in targets' Needs and in bench.Servers.
const (
	Name        = "redis"
	RedlockName = "redlock"
)

// RedlockVoters is how many servers, the stock's included, a Redlock target
// locks on: the smallest quorum that survives one server's loss.
const RedlockVoters = 3

// Backend is the Redis server holding the stock: the one -redis-addr names,
// else the one package backends resolves (STOCKGUARD_REDIS_ADDR, else a
// private redis-server started from PATH and stopped at Close, else Docker
// in a binary that has it).
var Backend = bench.Backend{
	Name:  Name,
	About: "Redis holding the stock: -redis-addr, else STOCKGUARD_REDIS_ADDR, else a private redis-server from PATH",
	Flags: func(fs *flag.FlagSet) bench.Opener {
		addr := fs.String("redis-addr", "", "Redis address host:port (default: resolved, see Backends)")
		return bench.Opener{
			Check: func() error {
				if *addr != "" && !strings.Contains(*addr, ":") {
					return fmt.Errorf("-redis-addr %q: want host:port", *addr)
				}
				return nil
			},
			Open: func(ctx context.Context, c bench.OpenConfig) (*bench.Opened, error) { return openRedis(ctx, *addr, c) },
		}
	},
}

// RedlockBackend is the Redlock voters besides the stock's server: the
// RedlockVoters-1 servers -redlock-addrs names, else private redis-servers
// started here. Redlock's cost is waiting for independent processes, so
// they are never the stock's server nor each other.
var RedlockBackend = bench.Backend{
	Name:  RedlockName,
	About: fmt.Sprintf("the %d other Redlock voters: -redlock-addrs, else private redis-servers from PATH", RedlockVoters-1),
	Flags: func(fs *flag.FlagSet) bench.Opener {
		list := fs.String("redlock-addrs", "", fmt.Sprintf("the %d Redis servers, host:port comma-separated, that redis-redlock locks on besides -redis-addr; each must be a server of its own (default: private redis-servers)", RedlockVoters-1))
		addrs := func() []string {
			if *list == "" {
				return nil
			}
			return strings.Split(*list, ",")
		}
		return bench.Opener{
			Check: func() error {
				as := addrs()
				if as == nil {
					return nil
				}
				if len(as) != RedlockVoters-1 {
					return fmt.Errorf("-redlock-addrs %q: want %d addresses", *list, RedlockVoters-1)
				}
				var stock string
				if f := fs.Lookup("redis-addr"); f != nil {
					stock = f.Value.String()
				}
				for _, a := range as {
					if !strings.Contains(a, ":") || a == stock {
						return fmt.Errorf("-redlock-addrs %q: want host:port of servers other than -redis-addr", *list)
					}
				}
				return nil
			},
			Open: func(ctx context.Context, c bench.OpenConfig) (*bench.Opened, error) {
				return openVoters(ctx, addrs(), c)
			},
		}
	},
}

// resolveTimeout bounds finding or starting one server (a Docker pull
// included).
const resolveTimeout = 3 * time.Minute

// closers closes what an open made, last first.
type closers []func() error

func (c closers) close() error {
	var errs []error
	for i := len(c) - 1; i >= 0; i-- {
		errs = append(errs, c[i]())
	}
	return errors.Join(errs...)
}

func openRedis(ctx context.Context, addr string, oc bench.OpenConfig) (_ *bench.Opened, err error) {
	var cs closers
	defer func() {
		if err != nil {
			cs.close()
		}
	}()
	source := "-redis-addr"
	if addr == "" {
		rctx, cancel := context.WithTimeout(ctx, resolveTimeout)
		r, err := backends.ResolveRedis(rctx)
		cancel()
		if err != nil {
			return nil, err
		}
		cs = append(cs, r.Close)
		addr, source = r.Addr, string(r.Source)
	}
	rdb, srv, err := connect(ctx, addr, oc, &cs)
	if err != nil {
		return nil, err
	}
	srv.Backend, srv.Source = Name, source
	return &bench.Opened{Conn: redis.UniversalClient(rdb), Servers: []bench.Server{srv}, Close: cs.close, Args: []string{"-redis-addr", addr}}, nil
}

func openVoters(ctx context.Context, addrs []string, oc bench.OpenConfig) (_ *bench.Opened, err error) {
	var cs closers
	defer func() {
		if err != nil {
			cs.close()
		}
	}()
	source := "-redlock-addrs"
	if len(addrs) == 0 {
		source = string(backends.SourceLocal)
		for range RedlockVoters - 1 {
			r, err := backends.StartLocalRedis(ctx)
			if err != nil {
				return nil, fmt.Errorf("redlock voters: %w", err)
			}
			cs = append(cs, r.Close)
			addrs = append(addrs, r.Addr)
		}
	}
	o := &bench.Opened{}
	var voters []redis.UniversalClient
	for _, a := range addrs {
		rdb, srv, err := connect(ctx, a, oc, &cs)
		if err != nil {
			return nil, fmt.Errorf("redlock voter: %w", err)
		}
		srv.Backend, srv.Source = RedlockName, source
		voters = append(voters, rdb)
		o.Servers = append(o.Servers, srv)
	}
	o.Conn, o.Close = voters, cs.close
	o.Args = []string{"-redlock-addrs", strings.Join(addrs, ",")}
	return o, nil
}

// connect opens a client on addr as oc says (its pool, the round trip to
// put between them), adds its Close to cs, and reads the server's version.
// The server's CPU is read through INFO cpu, whoever started it.
func connect(ctx context.Context, addr string, oc bench.OpenConfig, cs *closers) (*redis.Client, bench.Server, error) {
	via, end, err := bench.Route(addr, oc.RTT)
	if err != nil {
		return nil, bench.Server{}, err
	}
	*cs = append(*cs, end)
	rdb := redis.NewClient(&redis.Options{Addr: via, PoolSize: oc.Pool})
	*cs = append(*cs, rdb.Close)
	pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	info, err := rdb.Info(pctx, "server").Result()
	if err != nil {
		return nil, bench.Server{}, fmt.Errorf("redis at %s: %w", addr, err)
	}
	srv := bench.Server{Product: "Redis", Version: "?", Addr: addr, CPU: InfoCPU(rdb), CPUFrom: bench.CPUFromInfo}
	var valkey string // Valkey reports the Redis version it is compatible with, and its own
	for line := range strings.Lines(info) {
		line = strings.TrimSpace(line)
		if v, ok := strings.CutPrefix(line, "redis_version:"); ok {
			srv.Version = v
		}
		if v, ok := strings.CutPrefix(line, "valkey_version:"); ok {
			valkey = v
		}
	}
	if valkey != "" {
		srv.Product, srv.Version = "Valkey", valkey
	}
	return rdb, srv, nil
}

// InfoCPU is a bench.Server's CPU reader for the Redis or Valkey server rdb
// reaches: what its INFO cpu says (see backends.RedisCPU).
func InfoCPU(rdb redis.Cmdable) func(context.Context) (time.Duration, error) {
	return func(ctx context.Context) (time.Duration, error) {
		info, err := rdb.Info(ctx, "cpu").Result()
		if err != nil {
			return 0, fmt.Errorf("INFO cpu: %w", err)
		}
		return backends.RedisCPU(info)
	}
}
