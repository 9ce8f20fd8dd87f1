package backends

import (
	"context"
	"errors"
	"fmt"
	"os"

	"github.com/go-sql-driver/mysql"
)

// Source says how a server was found.
type Source string

// The three ways, tried in this order unless STOCKGUARD_BACKEND forces one.
const (
	SourceEnv    Source = "env"    // STOCKGUARD_MYSQL_DSN / STOCKGUARD_REDIS_ADDR
	SourceLocal  Source = "local"  // private server started from a binary on PATH
	SourceDocker Source = "docker" // container started through testcontainers-go
)

// Environment variables read by this package.
const (
	EnvMySQLDSN   = "STOCKGUARD_MYSQL_DSN"
	EnvRedisAddr  = "STOCKGUARD_REDIS_ADDR"
	EnvBackend    = "STOCKGUARD_BACKEND"
	EnvRequire    = "STOCKGUARD_REQUIRE_BACKENDS"
	EnvMySQLImage = "STOCKGUARD_MYSQL_IMAGE"
	EnvRedisImage = "STOCKGUARD_REDIS_IMAGE"
)

// ErrUnavailable is returned when no way to reach a server worked.
var ErrUnavailable = errors.New("backends: no server available")

// Unavailable returns an error wrapping ErrUnavailable and err that says
// what could not be had and how to provide the servers.
func Unavailable(what string, err error) error {
	return fmt.Errorf("%w: %s: %w\n%s", ErrUnavailable, what, err, howTo)
}

// Required reports whether STOCKGUARD_REQUIRE_BACKENDS is set (and not
// "0"): a test that cannot have its servers must then fail, not skip.
func Required() bool {
	v := os.Getenv(EnvRequire)
	return v != "" && v != "0"
}

const howTo = `stockguard needs a MySQL/MariaDB and a Redis server (and PostgreSQL, TiDB, Valkey for their tests). It finds them, in order:
  1. env:    STOCKGUARD_MYSQL_DSN=root@tcp(127.0.0.1:3306)/test  STOCKGUARD_REDIS_ADDR=127.0.0.1:6379
             (STOCKGUARD_POSTGRES_DSN=postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable
              STOCKGUARD_TIDB_DSN=root@tcp(127.0.0.1:4000)/test  STOCKGUARD_VALKEY_ADDR=127.0.0.1:6380)
  2. local:  mariadbd + mariadb-install-db (or mysqld) and redis-server on PATH — private servers are started
             (Debian: apt-get install mariadb-server redis-server postgresql); initdb + postgres on PATH
             or in /usr/lib/postgresql/*/bin; valkey-server on PATH
             (scripts/install-valkey.sh); tidb-server on PATH or built by scripts/build-tidb.sh
  3. docker: a healthy Docker engine — containers mysql:8.4 / redis:7.4 / postgres:17 / pingcap/tidb / valkey/valkey
             via testcontainers-go (images overridable with STOCKGUARD_MYSQL_IMAGE / STOCKGUARD_REDIS_IMAGE /
             STOCKGUARD_POSTGRES_IMAGE / STOCKGUARD_TIDB_IMAGE / STOCKGUARD_VALKEY_IMAGE;
             tests have it, stockbench when built with: go build -tags docker ./cmd/stockbench)
STOCKGUARD_BACKEND=env|local|docker forces one way.`

// Ways returns the ways to try, honouring STOCKGUARD_BACKEND.
func ways(envSet bool) ([]Source, error) {
	switch v := Source(os.Getenv(EnvBackend)); v {
	case "":
		if envSet {
			return []Source{SourceEnv}, nil
		}
		return []Source{SourceLocal, SourceDocker}, nil
	case SourceEnv, SourceLocal, SourceDocker:
		return []Source{v}, nil
	default:
		return nil, fmt.Errorf("backends: %s=%q, want env, local or docker", EnvBackend, v)
	}
}

// ResolveMySQL finds a MySQL server: STOCKGUARD_MYSQL_DSN, else a private
// server from local binaries, else a container. The caller closes it.
func ResolveMySQL(ctx context.Context) (*MySQL, error) { return ResolveMySQLWith(ctx) }

// ResolveMySQLWith is ResolveMySQL starting a private server with opts.
func ResolveMySQLWith(ctx context.Context, opts ...MySQLOption) (*MySQL, error) {
	return resolve(ctx, "mysql", EnvMySQLDSN, func(ctx context.Context, dsn string) (*MySQL, error) {
		if _, err := mysql.ParseDSN(dsn); err != nil {
			return nil, err
		}
		return &MySQL{DSN: dsn, Source: SourceEnv}, pingMySQL(ctx, dsn)
	}, func(ctx context.Context) (*MySQL, error) { return StartLocalMySQL(ctx, opts...) }, func(ctx context.Context) (*MySQL, error) {
		dsn, stop, err := startDocker(ctx, func(s DockerStarters) starter { return s.MySQL })
		if err != nil {
			return nil, err
		}
		return &MySQL{DSN: dsn, Source: SourceDocker, close: stop}, nil
	})
}

// ResolveRedis finds a Redis server: STOCKGUARD_REDIS_ADDR, else a private
// server from local binaries, else a container. The caller closes it.
func ResolveRedis(ctx context.Context) (*Redis, error) {
	return resolve(ctx, "redis", EnvRedisAddr, func(ctx context.Context, addr string) (*Redis, error) {
		r := &Redis{Addr: addr, Source: SourceEnv}
		return r, r.ping(ctx)
	}, func(ctx context.Context) (*Redis, error) { return StartLocalRedis(ctx) }, func(ctx context.Context) (*Redis, error) {
		addr, stop, err := startDocker(ctx, func(s DockerStarters) starter { return s.Redis })
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

// resolve tries the ways to a server in order (see ways): the server named
// by environment variable env, checked by fromEnv; a local one; a container.
func resolve[T any](ctx context.Context, what, env string,
	fromEnv func(context.Context, string) (T, error),
	local, docker func(context.Context) (T, error)) (T, error) {
	setting := os.Getenv(env)
	var zero T
	order, err := ways(setting != "")
	if err != nil {
		return zero, err
	}
	var errs []error
	for _, w := range order {
		var srv T
		switch w {
		case SourceEnv:
			if setting == "" {
				err = fmt.Errorf("%s is not set", env)
				break
			}
			srv, err = fromEnv(ctx, setting)
		case SourceLocal:
			srv, err = local(ctx)
		case SourceDocker:
			srv, err = docker(ctx)
		}
		if err == nil {
			return srv, nil
		}
		errs = append(errs, fmt.Errorf("%s: %w", w, err))
	}
	return zero, fmt.Errorf("%w (%s): %w\n%s", ErrUnavailable, what, errors.Join(errs...), howTo)
}
