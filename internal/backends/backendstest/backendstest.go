// Package backendstest gives tests and benchmarks the servers of package
// backends: shared per test binary, or private to one test, skipping the
// test (or failing it under STOCKGUARD_REQUIRE_BACKENDS) when none can be
// had. It is kept apart from package backends so that programs using
// backends (stockbench) do not link package testing.
package backendstest

import (
	"context"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	_ "github.com/jackc/pgx/v5/stdlib" // the "pgx" driver of Postgres
	"github.com/jmoiron/sqlx"
	"github.com/redis/go-redis/v9"

	"github.com/stockguard/stockguard/internal/backends"
	_ "github.com/stockguard/stockguard/internal/backends/dockerbackend" // the docker way, for tests
)

// lazy is a server shared by all tests of one binary (each test works on
// its own SKUs and keys): started on first use, remembered with its error so
// that a missing backend is looked for once, stopped by Main.
type lazy[T interface{ Close() error }] struct {
	mu      sync.Mutex
	started bool
	srv     T
	err     error
}

// get returns the server, starting it with start (bounded by timeout) on
// first use; it skips or fails tb when the server is unavailable.
func (l *lazy[T]) get(tb testing.TB, timeout time.Duration, start func(context.Context) (T, error)) T {
	tb.Helper()
	SkipShort(tb)
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.started {
		l.started = true
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		l.srv, l.err = start(ctx)
		cancel()
	}
	if l.err != nil {
		Unavailable(tb, l.err)
	}
	return l.srv
}

func (l *lazy[T]) close() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.started && l.err == nil {
		l.srv.Close()
	}
}

var (
	sharedMySQL         lazy[*backends.MySQL]
	sharedRedis         lazy[*backends.Redis]
	sharedCluster       lazy[*backends.Cluster]
	sharedTiDB          lazy[*backends.MySQL]
	sharedValkey        lazy[*backends.Redis]
	sharedValkeyCluster lazy[*backends.Cluster]
	sharedReplicated    lazy[*backends.Replicated]
	sharedPostgres      lazy[*backends.Postgres]
)

// startTimeout bounds resolving one server, Docker pulls included.
const startTimeout = 3 * time.Minute

// Main runs the tests of a package that uses this one, then calls stop (in
// order) and stops the shared servers. Call it from TestMain:
//
//	func TestMain(m *testing.M) { backendstest.Main(m) }
func Main(m *testing.M, stop ...func()) {
	code := m.Run()
	for _, f := range stop {
		f()
	}
	sharedMySQL.close()
	sharedRedis.close()
	sharedCluster.close()
	sharedTiDB.close()
	sharedValkey.close()
	sharedValkeyCluster.close()
	sharedReplicated.close()
	sharedPostgres.close()
	os.Exit(code)
}

// Unavailable skips tb because a server it needs could not be had (err
// says why), or fails it when STOCKGUARD_REQUIRE_BACKENDS is set.
func Unavailable(tb testing.TB, err error) {
	tb.Helper()
	if backends.Required() {
		tb.Fatalf("%v\n(%s is set: a missing backend is a failure)", err, backends.EnvRequire)
	}
	tb.Skipf("%v\n(set %s=1 to make this a failure)", err, backends.EnvRequire)
}

// SkipShort skips tests that need servers under go test -short.
func SkipShort(tb testing.TB) {
	tb.Helper()
	if testing.Short() {
		tb.Skip("needs a server; skipped under -short")
	}
}

// SharedMySQL returns the test binary's MySQL server, resolving it on first use.
func SharedMySQL(tb testing.TB) *backends.MySQL {
	tb.Helper()
	return sharedMySQL.get(tb, startTimeout, backends.ResolveMySQL)
}

// SharedRedis returns the test binary's Redis server, resolving it on first use.
func SharedRedis(tb testing.TB) *backends.Redis {
	tb.Helper()
	return sharedRedis.get(tb, startTimeout, backends.ResolveRedis)
}

// EnvTiDB, set to 1, runs the tests that need TiDB. They are many and
// slow on a small machine (every MySQL strategy through the conformance
// suites again), so plain go test skips them; CI runs them in a command of
// their own (.ci/run), with a tidb-server built by scripts/build-tidb.sh.
const EnvTiDB = "STOCKGUARD_TIDB"

// TiDBEnabled reports whether STOCKGUARD_TIDB is set (and not "0").
func TiDBEnabled() bool {
	v := os.Getenv(EnvTiDB)
	return v != "" && v != "0"
}

// SkipUnlessTiDB skips tb unless STOCKGUARD_TIDB is set, and under -short.
func SkipUnlessTiDB(tb testing.TB) {
	tb.Helper()
	SkipShort(tb)
	if !TiDBEnabled() {
		tb.Skipf("needs TiDB: set %s=1 (and build tidb-server: scripts/build-tidb.sh)", EnvTiDB)
	}
}

// SharedPostgres returns the test binary's PostgreSQL server, resolving it
// on first use (backends.ResolvePostgres).
func SharedPostgres(tb testing.TB) *backends.Postgres {
	tb.Helper()
	return sharedPostgres.get(tb, startTimeout, backends.ResolvePostgres)
}

// Postgres opens a database/sql pool (driver pgx) on the shared PostgreSQL
// server, closed when tb ends.
func Postgres(tb testing.TB) *sqlx.DB {
	tb.Helper()
	db, err := sqlx.Open("pgx", SharedPostgres(tb).DSN)
	if err != nil {
		tb.Fatal(err)
	}
	db.SetMaxOpenConns(128)
	db.SetMaxIdleConns(128)
	tb.Cleanup(func() { db.Close() })
	return db
}

// PrivatePostgres starts a PostgreSQL server from the local binaries for tb
// alone — for fault tests that pause, kill or restart it — and stops it
// when tb ends.
func PrivatePostgres(tb testing.TB, opts ...backends.PostgresOption) *backends.Postgres {
	tb.Helper()
	SkipShort(tb)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	p, err := backends.StartLocalPostgres(ctx, opts...)
	if err != nil {
		Unavailable(tb, backends.Unavailable("private postgres", err))
	}
	tb.Cleanup(func() { p.Close() })
	return p
}

// SharedTiDB returns the test binary's TiDB server, resolving it on first
// use (backends.ResolveTiDB); it skips tb unless STOCKGUARD_TIDB is set.
func SharedTiDB(tb testing.TB) *backends.MySQL {
	tb.Helper()
	SkipUnlessTiDB(tb)
	return sharedTiDB.get(tb, startTimeout, backends.ResolveTiDB)
}

// SharedValkey returns the test binary's Valkey server, resolving it on
// first use (backends.ResolveValkey).
func SharedValkey(tb testing.TB) *backends.Redis {
	tb.Helper()
	return sharedValkey.get(tb, startTimeout, backends.ResolveValkey)
}

// SharedValkeyCluster returns the test binary's local 3-master Valkey
// Cluster, starting it on first use, as SharedCluster does Redis's.
func SharedValkeyCluster(tb testing.TB) *backends.Cluster {
	tb.Helper()
	return sharedValkeyCluster.get(tb, time.Minute, func(ctx context.Context) (*backends.Cluster, error) {
		c, err := backends.StartLocalValkeyCluster(ctx, 3)
		if err != nil {
			return nil, backends.Unavailable("shared valkey cluster", err)
		}
		return c, nil
	})
}

// DB opens a pool on the shared MySQL server, closed when tb ends. edit, if
// given, adjusts the driver config (e.g. cfg.InterpolateParams = true).
func DB(tb testing.TB, edit ...func(*mysql.Config)) *sqlx.DB {
	tb.Helper()
	return openDB(tb, SharedMySQL(tb), edit)
}

// TiDB opens a pool on the shared TiDB server, closed when tb ends, as DB
// does on MySQL.
func TiDB(tb testing.TB, edit ...func(*mysql.Config)) *sqlx.DB {
	tb.Helper()
	return openDB(tb, SharedTiDB(tb), edit)
}

func openDB(tb testing.TB, m *backends.MySQL, edit []func(*mysql.Config)) *sqlx.DB {
	tb.Helper()
	cfg := m.Config()
	for _, e := range edit {
		e(cfg)
	}
	db, err := sqlx.Open("mysql", cfg.FormatDSN())
	if err != nil {
		tb.Fatal(err)
	}
	db.SetMaxOpenConns(256)
	db.SetMaxIdleConns(256)
	tb.Cleanup(func() { db.Close() })
	return db
}

// RedisClient opens a client on the shared Redis server, closed when tb ends.
func RedisClient(tb testing.TB) *redis.Client {
	tb.Helper()
	c := SharedRedis(tb).Client()
	tb.Cleanup(func() { c.Close() })
	return c
}

// ValkeyClient opens a client on the shared Valkey server, closed when tb
// ends.
func ValkeyClient(tb testing.TB) *redis.Client {
	tb.Helper()
	c := SharedValkey(tb).Client()
	tb.Cleanup(func() { c.Close() })
	return c
}

// PrivateRedis starts n Redis servers from the local binary for tb alone —
// for fault tests that pause, kill or restart them — and stops them when tb
// ends. Extra arguments go to every server's command line.
func PrivateRedis(tb testing.TB, n int, extra ...string) []*backends.Redis {
	tb.Helper()
	return private(tb, "private redis", n, func(ctx context.Context) (*backends.Redis, error) {
		return backends.StartLocalRedis(ctx, extra...)
	})
}

// PrivateValkey starts n Valkey servers from the local binary for tb
// alone, as PrivateRedis starts Redis servers.
func PrivateValkey(tb testing.TB, n int, extra ...string) []*backends.Redis {
	tb.Helper()
	return private(tb, "private valkey", n, func(ctx context.Context) (*backends.Redis, error) {
		return backends.StartLocalValkey(ctx, extra...)
	})
}

func private(tb testing.TB, what string, n int, start func(context.Context) (*backends.Redis, error)) []*backends.Redis {
	tb.Helper()
	SkipShort(tb)
	servers := make([]*backends.Redis, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range servers {
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			servers[i], errs[i] = start(ctx)
		})
	}
	wg.Wait()
	for _, s := range servers {
		if s != nil {
			tb.Cleanup(func() { s.Close() })
		}
	}
	for _, err := range errs {
		if err != nil {
			Unavailable(tb, backends.Unavailable(what, err))
		}
	}
	return servers
}

// SharedCluster returns the test binary's local 3-master Redis Cluster,
// starting it on first use; Main stops it. Tests share it as they share
// SharedRedis: each on its own keys. A test that stops or restarts nodes
// needs a PrivateCluster.
func SharedCluster(tb testing.TB) *backends.Cluster {
	tb.Helper()
	return sharedCluster.get(tb, time.Minute, func(ctx context.Context) (*backends.Cluster, error) {
		c, err := backends.StartLocalCluster(ctx, 3)
		if err != nil {
			return nil, backends.Unavailable("shared redis cluster", err)
		}
		return c, nil
	})
}

// PrivateCluster starts a local Redis Cluster of masters nodes for tb alone
// (opts: backends.WithClusterReplicas) and stops it when tb ends.
func PrivateCluster(tb testing.TB, masters int, opts ...backends.ClusterOption) *backends.Cluster {
	tb.Helper()
	SkipShort(tb)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c, err := backends.StartLocalCluster(ctx, masters, opts...)
	if err != nil {
		Unavailable(tb, backends.Unavailable("private redis cluster", err))
	}
	tb.Cleanup(func() { c.Close() })
	return c
}

// PrivateReplicated starts a private Redis master with replicas replicas
// for tb alone, in sync when it returns, and stops them when tb ends. Extra
// arguments go to every server's command line.
func PrivateReplicated(tb testing.TB, replicas int, extra ...string) *backends.Replicated {
	tb.Helper()
	SkipShort(tb)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	r, err := backends.StartLocalReplicated(ctx, replicas, extra...)
	if err != nil {
		Unavailable(tb, backends.Unavailable("private replicated redis", err))
	}
	tb.Cleanup(func() { r.Close() })
	return r
}

// EnvReplicas is bench's STOCKGUARD_REPLICAS: "full" runs the tests that
// start a replicated master per Redlock voter (the soak does).
const EnvReplicas = "STOCKGUARD_REPLICAS"

// ReplicatedVoters starts n Redlock voters for tb, each a private master
// with one replica in sync, and returns them with a client on each master,
// closed when tb ends. Unless EnvReplicas is "full" it skips tb.
func ReplicatedVoters(tb testing.TB, n int) ([]*backends.Replicated, []redis.UniversalClient) {
	tb.Helper()
	if os.Getenv(EnvReplicas) != "full" {
		tb.Skipf("%s=full starts a master and a replica per voter", EnvReplicas)
	}
	voters := make([]*backends.Replicated, n)
	clients := make([]redis.UniversalClient, n)
	for i := range voters {
		voters[i] = PrivateReplicated(tb, 1)
		c := voters[i].Client()
		tb.Cleanup(func() { c.Close() })
		clients[i] = c
	}
	return voters, clients
}

// SharedReplicated returns the test binary's private Redis master with one
// replica, starting it on first use; Main stops it. Tests share it as they
// share SharedRedis, each on its own keys; a test that pauses or kills the
// replica needs a PrivateReplicated.
func SharedReplicated(tb testing.TB) *backends.Replicated {
	tb.Helper()
	return sharedReplicated.get(tb, time.Minute, func(ctx context.Context) (*backends.Replicated, error) {
		r, err := backends.StartLocalReplicated(ctx, 1)
		if err != nil {
			return nil, backends.Unavailable("shared replicated redis", err)
		}
		return r, nil
	})
}
