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
	EnvMySQLDSN       = "STOCKGUARD_MYSQL_DSN"
	EnvRedisAddr      = "STOCKGUARD_REDIS_ADDR"
	EnvBackend        = "STOCKGUARD_BACKEND"
	EnvRequire        = "STOCKGUARD_REQUIRE_BACKENDS"
	EnvMySQLImage     = "STOCKGUARD_MYSQL_IMAGE"
	EnvRedisImage     = "STOCKGUARD_REDIS_IMAGE"
	defaultMySQLImage = "mysql:8.4"
	defaultRedisImage = "redis:7.4"
)

// ErrUnavailable is returned when no way to reach a server worked.
var ErrUnavailable = errors.New("backends: no server available")

const howTo = `stockguard needs a MySQL/MariaDB and a Redis server. It finds them, in order:
  1. env:    STOCKGUARD_MYSQL_DSN=root@tcp(127.0.0.1:3306)/test  STOCKGUARD_REDIS_ADDR=127.0.0.1:6379
  2. local:  mariadbd + mariadb-install-db (or mysqld) and redis-server on PATH — private servers are started
             (Debian: apt-get install mariadb-server redis-server)
  3. docker: a healthy Docker engine — containers mysql:8.4 / redis:7.4 via testcontainers-go
             (images overridable with STOCKGUARD_MYSQL_IMAGE / STOCKGUARD_REDIS_IMAGE)
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
func ResolveMySQL(ctx context.Context) (*MySQL, error) {
	dsn := os.Getenv(EnvMySQLDSN)
	order, err := ways(dsn != "")
	if err != nil {
		return nil, err
	}
	var errs []error
	for _, w := range order {
		var m *MySQL
		switch w {
		case SourceEnv:
			if dsn == "" {
				err = fmt.Errorf("%s is not set", EnvMySQLDSN)
				break
			}
			if _, err = mysql.ParseDSN(dsn); err != nil {
				break
			}
			m = &MySQL{DSN: dsn, Source: SourceEnv}
			err = pingMySQL(ctx, dsn)
		case SourceLocal:
			m, err = StartLocalMySQL(ctx)
		case SourceDocker:
			m, err = startDockerMySQL(ctx)
		}
		if err == nil {
			return m, nil
		}
		errs = append(errs, fmt.Errorf("%s: %w", w, err))
	}
	return nil, fmt.Errorf("%w (mysql): %w\n%s", ErrUnavailable, errors.Join(errs...), howTo)
}

// ResolveRedis finds a Redis server: STOCKGUARD_REDIS_ADDR, else a private
// server from local binaries, else a container. The caller closes it.
func ResolveRedis(ctx context.Context) (*Redis, error) {
	addr := os.Getenv(EnvRedisAddr)
	order, err := ways(addr != "")
	if err != nil {
		return nil, err
	}
	var errs []error
	for _, w := range order {
		var r *Redis
		switch w {
		case SourceEnv:
			if addr == "" {
				err = fmt.Errorf("%s is not set", EnvRedisAddr)
				break
			}
			r = &Redis{Addr: addr, Source: SourceEnv}
			err = r.ping(ctx)
		case SourceLocal:
			r, err = StartLocalRedis(ctx)
		case SourceDocker:
			r, err = startDockerRedis(ctx)
		}
		if err == nil {
			return r, nil
		}
		errs = append(errs, fmt.Errorf("%s: %w", w, err))
	}
	return nil, fmt.Errorf("%w (redis): %w\n%s", ErrUnavailable, errors.Join(errs...), howTo)
}
