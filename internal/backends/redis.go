package backends

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// Redis is a reachable Redis server.
type Redis struct {
	Addr   string   // host:port
	Source Source   // how it was found
	Proc   *Process // the server process when Source is SourceLocal, else nil

	close func() error
}

// Close stops the server if this package started it.
func (r *Redis) Close() error {
	if r.close == nil {
		return nil
	}
	return r.close()
}

// Client returns a new go-redis client for r; the caller closes it.
func (r *Redis) Client() *redis.Client {
	return redis.NewClient(&redis.Options{Addr: r.Addr, PoolSize: 128})
}

// Restart brings a killed local server back on the same port, empty.
func (r *Redis) Restart(ctx context.Context) error {
	if r.Proc == nil {
		return fmt.Errorf("backends: redis %s was not started here (%s)", r.Addr, r.Source)
	}
	return r.Proc.Restart(ctx, r.ping)
}

func (r *Redis) ping(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	var d net.Dialer
	c, err := d.DialContext(ctx, "tcp", r.Addr)
	if err != nil {
		return err
	}
	defer c.Close()
	if dl, ok := ctx.Deadline(); ok {
		c.SetDeadline(dl)
	}
	if _, err := c.Write([]byte("PING\r\n")); err != nil {
		return err
	}
	buf := make([]byte, 7)
	n, err := c.Read(buf)
	if err != nil {
		return err
	}
	if string(buf[:n]) != "+PONG\r\n" {
		return fmt.Errorf("redis %s answered %q to PING", r.Addr, buf[:n])
	}
	return nil
}

// StartLocalRedis starts a private redis-server from PATH on a free loopback
// port, in its own temp dir, with persistence off. extra arguments are
// appended to the command line (e.g. "--cluster-enabled", "yes").
func StartLocalRedis(ctx context.Context, extra ...string) (*Redis, error) {
	return startLocalRedisLike(ctx, "redis-server", extra...)
}

// startLocalRedisLike starts server, redis-server or a server that takes
// its command line (valkey-server), as StartLocalRedis describes.
func startLocalRedisLike(ctx context.Context, server string, extra ...string) (*Redis, error) {
	return startLocalRedisPort(ctx, server, func(int) []string { return extra })
}

// startLocalRedisPort is startLocalRedisLike with the extra arguments
// given by the port the server will listen on (a cluster node announces
// its bus port, port+10000).
func startLocalRedisPort(ctx context.Context, server string, extraFor func(port int) []string) (*Redis, error) {
	bin, err := exec.LookPath(server)
	if err != nil {
		return nil, fmt.Errorf("backends: no %s on PATH: %w", server, err)
	}
	var lastErr error
	for range 3 { // another process may grab the free port before the server binds it
		port, err := freePort()
		if err != nil {
			return nil, err
		}
		dir, err := os.MkdirTemp("", "stockguard-"+strings.TrimSuffix(server, "-server")+"-")
		if err != nil {
			return nil, err
		}
		argv := append([]string{bin,
			"--port", strconv.Itoa(port), "--bind", "127.0.0.1",
			"--dir", dir, "--save", "", "--appendonly", "no",
			"--daemonize", "no", "--protected-mode", "no",
			"--maxclients", "4096", "--loglevel", "warning",
		}, extraFor(port)...)
		p, err := start(dir, port, argv...)
		if err != nil {
			os.RemoveAll(dir)
			return nil, err
		}
		r := &Redis{Addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), Source: SourceLocal, Proc: p, close: p.Close}
		wctx, cancel := context.WithTimeout(ctx, 15*time.Second)
		lastErr = p.waitReady(wctx, r.ping)
		cancel()
		if lastErr == nil {
			return r, nil
		}
		p.Close()
	}
	return nil, lastErr
}
