package peers

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/stockguard/stockguard/bench"
	"github.com/stockguard/stockguard/bench/redistargets"
)

// PoolSize is the connection pool of every go-redis client here: above the
// 64 goroutines of the widest measurement, so that no peer waits for a
// connection.
const PoolSize = 128

// Servers are private Redis servers, each with a go-redis client.
type Servers struct {
	Clients []redis.UniversalClient
	Addrs   []string
	// Version is the first server's redis_version.
	Version string
	closers []func() error
}

// OpenServers starts n private redis-server processes from PATH — through
// the harness's Redlock backend, which never uses a shared server — so
// that INFO commandstats counts this benchmark's commands only. Without a
// redis-server on PATH it fails; there is no fallback to a shared server.
func OpenServers(ctx context.Context, n int) (_ *Servers, err error) {
	s := &Servers{}
	defer func() {
		if err != nil {
			s.Close()
		}
	}()
	for len(s.Clients) < n {
		o, err := redistargets.RedlockBackend.Flags(flag.NewFlagSet("peers", flag.ContinueOnError)).Open(ctx, bench.OpenConfig{Pool: PoolSize})
		if err != nil {
			return nil, fmt.Errorf("peers: starting redis servers: %w", err)
		}
		s.closers = append(s.closers, o.Close)
		clients, err := bench.Conn[[]redis.UniversalClient](bench.Servers{"v": o.Conn}, "v")
		if err != nil {
			return nil, err
		}
		for i, c := range clients {
			if len(s.Clients) == n {
				break
			}
			s.Clients = append(s.Clients, c)
			s.Addrs = append(s.Addrs, o.Servers[i].Addr)
			if s.Version == "" {
				s.Version = o.Servers[i].Version
			}
		}
	}
	return s, nil
}

// Close closes the clients and stops the servers.
func (s *Servers) Close() error {
	var errs []error
	for i := len(s.closers) - 1; i >= 0; i-- {
		errs = append(errs, s.closers[i]())
	}
	return errors.Join(errs...)
}

// Commands returns how many commands servers have run so far, those
// run by scripts included, by INFO commandstats; INFO itself is not
// counted.
func Commands(ctx context.Context, servers []redis.UniversalClient) (int64, error) {
	var total int64
	for _, c := range servers {
		info, err := c.Info(ctx, "commandstats").Result()
		if err != nil {
			return 0, fmt.Errorf("peers: INFO commandstats: %w", err)
		}
		for line := range strings.Lines(info) {
			name, rest, ok := strings.Cut(strings.TrimSpace(line), ":")
			if !ok || !strings.HasPrefix(name, "cmdstat_") || name == "cmdstat_info" {
				continue
			}
			var calls int64
			if _, err := fmt.Sscanf(rest, "calls=%d", &calls); err != nil {
				return 0, fmt.Errorf("peers: INFO commandstats line %q: %w", line, err)
			}
			total += calls
		}
	}
	return total, nil
}
