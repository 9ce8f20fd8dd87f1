package backends

import (
	"context"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/jmoiron/sqlx"
	"github.com/redis/go-redis/v9"
)

// shared holds the servers of one test binary: started on first use, shared
// by all its tests (each test works on its own SKUs and keys), stopped by Main.
var shared struct {
	mu       sync.Mutex
	mysql    *MySQL
	mysqlErr error
	redis    *Redis
	redisErr error
	cluster  *Cluster
	clusErr  error
}

// startTimeout bounds resolving one server, Docker pulls included.
const startTimeout = 3 * time.Minute

// Main runs the tests of a package that uses this one and stops the servers
// they started. Call it from TestMain:
//
//	func TestMain(m *testing.M) { backends.Main(m) }
func Main(m *testing.M) {
	code := m.Run()
	shared.mu.Lock()
	if shared.mysql != nil {
		shared.mysql.Close()
	}
	if shared.redis != nil {
		shared.redis.Close()
	}
	if shared.cluster != nil {
		shared.cluster.Close()
	}
	shared.mu.Unlock()
	os.Exit(code)
}

// unavailable skips tb, or fails it when STOCKGUARD_REQUIRE_BACKENDS is set.
func unavailable(tb testing.TB, err error) {
	tb.Helper()
	if os.Getenv(EnvRequire) != "" && os.Getenv(EnvRequire) != "0" {
		tb.Fatalf("%v\n(%s is set: a missing backend is a failure)", err, EnvRequire)
	}
	tb.Skipf("%v\n(set %s=1 to make this a failure)", err, EnvRequire)
}

// skipShort skips tests that need servers under go test -short.
func skipShort(tb testing.TB) {
	tb.Helper()
	if testing.Short() {
		tb.Skip("needs a server; skipped under -short")
	}
}

// SharedMySQL returns the test binary's MySQL server, resolving it on first use.
func SharedMySQL(tb testing.TB) *MySQL {
	tb.Helper()
	skipShort(tb)
	shared.mu.Lock()
	defer shared.mu.Unlock()
	if shared.mysql == nil && shared.mysqlErr == nil {
		ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
		shared.mysql, shared.mysqlErr = ResolveMySQL(ctx)
		cancel()
	}
	if shared.mysqlErr != nil {
		unavailable(tb, shared.mysqlErr)
	}
	return shared.mysql
}

// SharedRedis returns the test binary's Redis server, resolving it on first use.
func SharedRedis(tb testing.TB) *Redis {
	tb.Helper()
	skipShort(tb)
	shared.mu.Lock()
	defer shared.mu.Unlock()
	if shared.redis == nil && shared.redisErr == nil {
		ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
		shared.redis, shared.redisErr = ResolveRedis(ctx)
		cancel()
	}
	if shared.redisErr != nil {
		unavailable(tb, shared.redisErr)
	}
	return shared.redis
}

// DB opens a pool on the shared MySQL server, closed when tb ends. edit, if
// given, adjusts the driver config (e.g. cfg.InterpolateParams = true).
func DB(tb testing.TB, edit ...func(*mysql.Config)) *sqlx.DB {
	tb.Helper()
	cfg := SharedMySQL(tb).Config()
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

// PrivateRedis starts n Redis servers from the local binary for tb alone —
// for fault tests that pause, kill or restart them — and stops them when tb
// ends. Extra arguments go to every server's command line.
func PrivateRedis(tb testing.TB, n int, extra ...string) []*Redis {
	tb.Helper()
	skipShort(tb)
	servers := make([]*Redis, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range servers {
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			servers[i], errs[i] = StartLocalRedis(ctx, extra...)
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
			unavailable(tb, fmt.Errorf("%w: private redis: %w\n%s", ErrUnavailable, err, howTo))
		}
	}
	return servers
}

// SharedCluster returns the test binary's local 3-master Redis Cluster,
// starting it on first use; Main stops it. Tests share it as they share
// SharedRedis: each on its own keys. A test that stops or restarts nodes
// needs a PrivateCluster.
func SharedCluster(tb testing.TB) *Cluster {
	tb.Helper()
	skipShort(tb)
	shared.mu.Lock()
	defer shared.mu.Unlock()
	if shared.cluster == nil && shared.clusErr == nil {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		shared.cluster, shared.clusErr = StartLocalCluster(ctx, 3)
		cancel()
		if shared.clusErr != nil {
			shared.clusErr = fmt.Errorf("%w: shared redis cluster: %w\n%s", ErrUnavailable, shared.clusErr, howTo)
		}
	}
	if shared.clusErr != nil {
		unavailable(tb, shared.clusErr)
	}
	return shared.cluster
}

// PrivateCluster starts a local Redis Cluster of masters nodes for tb alone
// and stops it when tb ends.
func PrivateCluster(tb testing.TB, masters int) *Cluster {
	tb.Helper()
	skipShort(tb)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c, err := StartLocalCluster(ctx, masters)
	if err != nil {
		unavailable(tb, fmt.Errorf("%w: private redis cluster: %w\n%s", ErrUnavailable, err, howTo))
	}
	tb.Cleanup(func() { c.Close() })
	return c
}
