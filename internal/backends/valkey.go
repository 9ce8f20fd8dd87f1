package backends

import (
	"context"
	"fmt"
)

// Valkey is found like Redis, through its own settings; it is served as a
// *Redis, since it speaks the same protocol and takes the same command line.
const (
	EnvValkeyAddr  = "STOCKGUARD_VALKEY_ADDR"
	EnvValkeyImage = "STOCKGUARD_VALKEY_IMAGE"
)

// ResolveValkey finds a Valkey server: STOCKGUARD_VALKEY_ADDR, else a
// private valkey-server from PATH, else a container. The caller closes it.
func ResolveValkey(ctx context.Context) (*Redis, error) {
	return resolve(ctx, "valkey", EnvValkeyAddr, func(ctx context.Context, addr string) (*Redis, error) {
		r := &Redis{Addr: addr, Source: SourceEnv}
		return r, r.ping(ctx)
	}, func(ctx context.Context) (*Redis, error) { return StartLocalValkey(ctx) }, func(ctx context.Context) (*Redis, error) {
		addr, stop, err := startDocker(ctx, func(s DockerStarters) starter { return s.Valkey })
		if err != nil {
			return nil, err
		}
		r := &Redis{Addr: addr, Source: SourceDocker, close: stop}
		if err := r.ping(ctx); err != nil {
			r.Close()
			return nil, fmt.Errorf("backends: docker unavailable: a container started but %s does not answer: %w", addr, err)
		}
		return r, nil
	})
}

// StartLocalValkey starts a private valkey-server from PATH, as
// StartLocalRedis starts a redis-server.
func StartLocalValkey(ctx context.Context, extra ...string) (*Redis, error) {
	return startLocalRedisLike(ctx, "valkey-server", extra...)
}

// StartLocalValkeyCluster starts a Valkey Cluster of masters
// valkey-server processes, as StartLocalCluster starts a Redis Cluster.
func StartLocalValkeyCluster(ctx context.Context, masters int, opts ...ClusterOption) (*Cluster, error) {
	return startLocalCluster(ctx, "valkey-server", masters, opts...)
}
