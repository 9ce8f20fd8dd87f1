// Package dockerbackend is the docker way of package backends: MySQL and
// Redis containers started through testcontainers-go. Importing it
// registers it (backends.UseDocker). It is a package of its own because
// testcontainers-go links package testing: tests get it through
// backendstest, stockbench only when built with -tags docker.
package dockerbackend

import (
	"context"
	"crypto/rand"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/moby/moby/api/types/network"
	"github.com/moby/moby/client"
	"github.com/testcontainers/testcontainers-go"
	tclog "github.com/testcontainers/testcontainers-go/log"
	tcmariadb "github.com/testcontainers/testcontainers-go/modules/mariadb"
	tcmysql "github.com/testcontainers/testcontainers-go/modules/mysql"
	tcpostgres "github.com/testcontainers/testcontainers-go/modules/postgres"
	tcredis "github.com/testcontainers/testcontainers-go/modules/redis"
	"github.com/testcontainers/testcontainers-go/wait"

	"github.com/stockguard/stockguard/internal/backends"
)

func init() {
	backends.UseDocker(backends.DockerStarters{MySQL: StartMySQL, Redis: StartRedis, TiDB: StartTiDB, Valkey: StartValkey, Postgres: StartPostgres})
}

// The images started unless STOCKGUARD_MYSQL_IMAGE, STOCKGUARD_REDIS_IMAGE,
// STOCKGUARD_TIDB_IMAGE or STOCKGUARD_VALKEY_IMAGE name others.
const (
	DefaultMySQLImage    = "mysql:8.4"
	DefaultRedisImage    = "redis:7.4"
	DefaultTiDBImage     = "pingcap/tidb:v8.5.0"
	DefaultValkeyImage   = "valkey/valkey:8.0"
	DefaultPostgresImage = "postgres:17"
)

const (
	// dockerHealthTimeout bounds finding a Docker engine that answers.
	dockerHealthTimeout = 10 * time.Second
	// dockerStartTimeout bounds one container start, image pull included:
	// a registry that cannot be reached must come back as an error, not as
	// a test binary that hangs until go test kills it.
	dockerStartTimeout = 2 * time.Minute

	envDockerHost   = "DOCKER_HOST"
	envRyukDisabled = "TESTCONTAINERS_RYUK_DISABLED"
	envHostOverride = "TESTCONTAINERS_HOST_OVERRIDE"

	// startLabel marks the container of one start, so that it can be
	// removed even when testcontainers failed without handing it back.
	startLabel = "org.stockguard.backends.start"
)

// quiet discards testcontainers' log lines (banner, pulls, wait retries):
// every failure that matters comes back as an error.
var quiet = tclog.NewNoopLogger()

// dockerSetup runs once, before testcontainers reads its configuration,
// which it does once per process.
var dockerSetup sync.Once

// StartMySQL starts a MySQL container (DefaultMySQLImage unless
// STOCKGUARD_MYSQL_IMAGE names another; a MariaDB image goes through the
// mariadb module) with user root, no password and database test, tuned like
// backends.StartLocalMySQL. It returns the DSN and how to remove the
// container.
func StartMySQL(ctx context.Context) (dsn string, stop func() error, err error) {
	image := imageFromEnv(backends.EnvMySQLImage, DefaultMySQLImage)
	const port = "3306/tcp"
	// The modules wait for a log line of the official images ("port: 3306
	// MySQL Community Server", "... mariadb.org binary distribution"), which
	// other builds of the same server do not print.
	ready := &mysqlReady{port: port} // a pointer: wait.ForAll calls IsNil on it
	opts := []testcontainers.ContainerCustomizer{
		testcontainers.WithLogger(quiet),
		testcontainers.WithCmd("--max-connections=1000", "--skip-name-resolve",
			"--innodb-buffer-pool-size=256M", "--innodb-flush-log-at-trx-commit=2",
			"--skip-log-bin", "--performance-schema=OFF"),
		testcontainers.WithWaitStrategyAndDeadline(dockerStartTimeout, ready),
	}
	run := func(ctx context.Context, label testcontainers.ContainerCustomizer) (testcontainers.Container, error) {
		return tcmysql.Run(ctx, image, append(opts, label,
			tcmysql.WithUsername("root"), tcmysql.WithPassword(""), tcmysql.WithDatabase("test"))...)
	}
	if strings.Contains(strings.ToLower(image), "mariadb") {
		run = func(ctx context.Context, label testcontainers.ContainerCustomizer) (testcontainers.Container, error) {
			return tcmariadb.Run(ctx, image, append(opts, label,
				tcmariadb.WithUsername("root"), tcmariadb.WithPassword(""), tcmariadb.WithDatabase("test"))...)
		}
	}
	ctr, host, p, err := runContainer(ctx, image, port, run)
	if err != nil {
		return "", nil, err
	}
	return dockerMySQLConfig(host, p).FormatDSN(), terminator(ctr), nil
}

// dockerMySQLConfig is the driver config of a MySQL container's root user and test database.
func dockerMySQLConfig(host string, port network.Port) *mysql.Config {
	cfg := mysql.NewConfig()
	cfg.User, cfg.Net, cfg.Addr, cfg.DBName = "root", "tcp", net.JoinHostPort(host, port.Port()), "test"
	return cfg
}

// mysqlReady is a wait strategy: the server answers as root on database
// test over the mapped port — which happens only once the entrypoint's init
// phase (run with --skip-networking) is over and the database exists.
type mysqlReady struct{ port string }

// WaitUntilReady polls until the server answers, the container stops or ctx
// ends.
func (w mysqlReady) WaitUntilReady(ctx context.Context, t wait.StrategyTarget) error {
	for {
		err := w.ping(ctx, t)
		if err == nil {
			return nil
		}
		if st, serr := t.State(ctx); serr == nil && !st.Running {
			return fmt.Errorf("container %s: %w", st.Status, err)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w (last: %w)", ctx.Err(), err)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func (w mysqlReady) ping(ctx context.Context, t wait.StrategyTarget) error {
	host, err := t.Host(ctx)
	if err != nil {
		return err
	}
	port, err := t.MappedPort(ctx, w.port)
	if err != nil {
		return err
	}
	cfg := dockerMySQLConfig(loopback(host), port)
	cfg.Timeout = 2 * time.Second
	// Docker's port proxy accepts connections before anything listens
	// behind it; the driver would log each of them as an unexpected EOF.
	cfg.Logger = log.New(io.Discard, "", 0)
	conn, err := mysql.NewConnector(cfg)
	if err != nil {
		return err
	}
	db := sql.OpenDB(conn)
	defer db.Close()
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	return db.PingContext(ctx)
}

// StartRedis starts a Redis container (DefaultRedisImage unless
// STOCKGUARD_REDIS_IMAGE names another) with persistence off, like
// backends.StartLocalRedis. It returns the server's address and how to
// remove the container.
func StartRedis(ctx context.Context) (addr string, stop func() error, err error) {
	image := imageFromEnv(backends.EnvRedisImage, DefaultRedisImage)
	const port = "6379/tcp"
	run := func(ctx context.Context, label testcontainers.ContainerCustomizer) (testcontainers.Container, error) {
		return tcredis.Run(ctx, image, label,
			testcontainers.WithLogger(quiet),
			testcontainers.WithCmd("redis-server", "--save", "", "--appendonly", "no", "--maxclients", "4096"),
		)
	}
	ctr, host, p, err := runContainer(ctx, image, port, run)
	if err != nil {
		return "", nil, err
	}
	return net.JoinHostPort(host, p.Port()), terminator(ctr), nil
}

// StartTiDB starts a TiDB container (DefaultTiDBImage unless
// STOCKGUARD_TIDB_IMAGE names another): one tidb-server on the in-memory
// unistore engine, like backends.StartLocalTiDB, whose root user has no
// password and whose database test exists from the start. It returns the
// DSN and how to remove the container.
func StartTiDB(ctx context.Context) (dsn string, stop func() error, err error) {
	image := imageFromEnv(backends.EnvTiDBImage, DefaultTiDBImage)
	const port = "4000/tcp"
	run := func(ctx context.Context, label testcontainers.ContainerCustomizer) (testcontainers.Container, error) {
		return testcontainers.Run(ctx, image, label,
			testcontainers.WithLogger(quiet),
			testcontainers.WithExposedPorts(port),
			testcontainers.WithCmd("-store", "unistore", "-path", "", "-L", "error"),
			testcontainers.WithWaitStrategyAndDeadline(dockerStartTimeout, &mysqlReady{port: port}),
		)
	}
	ctr, host, p, err := runContainer(ctx, image, port, run)
	if err != nil {
		return "", nil, err
	}
	return dockerMySQLConfig(host, p).FormatDSN(), terminator(ctr), nil
}

// StartValkey starts a Valkey container (DefaultValkeyImage unless
// STOCKGUARD_VALKEY_IMAGE names another) with persistence off, like
// backends.StartLocalValkey. It returns the server's address and how to
// remove the container.
func StartValkey(ctx context.Context) (addr string, stop func() error, err error) {
	image := imageFromEnv(backends.EnvValkeyImage, DefaultValkeyImage)
	const port = "6379/tcp"
	run := func(ctx context.Context, label testcontainers.ContainerCustomizer) (testcontainers.Container, error) {
		// The redis module's wait (the log line "Ready to accept
		// connections") and port are Valkey's too.
		return tcredis.Run(ctx, image, label,
			testcontainers.WithLogger(quiet),
			testcontainers.WithCmd("valkey-server", "--save", "", "--appendonly", "no", "--maxclients", "4096"),
		)
	}
	ctr, host, p, err := runContainer(ctx, image, port, run)
	if err != nil {
		return "", nil, err
	}
	return net.JoinHostPort(host, p.Port()), terminator(ctr), nil
}

// StartPostgres starts a PostgreSQL container (DefaultPostgresImage unless
// STOCKGUARD_POSTGRES_IMAGE names another) with user postgres, trust
// authentication and database postgres, tuned like
// backends.StartLocalPostgres (not durable). It returns a pgx connection URL
// and how to remove the container.
func StartPostgres(ctx context.Context) (dsn string, stop func() error, err error) {
	image := imageFromEnv(backends.EnvPostgresImage, DefaultPostgresImage)
	const port = "5432/tcp"
	run := func(ctx context.Context, label testcontainers.ContainerCustomizer) (testcontainers.Container, error) {
		return tcpostgres.Run(ctx, image, label,
			testcontainers.WithLogger(quiet),
			tcpostgres.WithUsername("postgres"), tcpostgres.WithPassword("postgres"), tcpostgres.WithDatabase("postgres"),
			testcontainers.WithEnv(map[string]string{"POSTGRES_HOST_AUTH_METHOD": "trust"}),
			testcontainers.WithCmd("postgres", "-c", "max_connections=600", "-c", "fsync=off",
				"-c", "synchronous_commit=off", "-c", "full_page_writes=off"),
			// The image restarts the server once after its init scripts: the
			// module's wait (the ready line twice, then the port) sees it through.
			tcpostgres.BasicWaitStrategies(),
		)
	}
	ctr, host, p, err := runContainer(ctx, image, port, run)
	if err != nil {
		return "", nil, err
	}
	return "postgres://postgres@" + net.JoinHostPort(host, p.Port()) + "/postgres?sslmode=disable", terminator(ctr), nil
}

func imageFromEnv(env, def string) string {
	if v := os.Getenv(env); v != "" {
		return v
	}
	return def
}

// loopback turns the daemon host of a local engine into an IPv4 address, as
// in the DSNs and addresses of the other sources.
func loopback(host string) string {
	if host == "localhost" {
		return "127.0.0.1"
	}
	return host
}

// runContainer checks that a Docker engine answers, then starts a container
// with run within dockerStartTimeout, and returns where its port is mapped.
// A container that fails to come up is removed, found by a label unique to
// this start when testcontainers handed back none (a panic inside it, which
// becomes an error).
func runContainer(ctx context.Context, image, port string, run func(context.Context, testcontainers.ContainerCustomizer) (testcontainers.Container, error)) (ctr testcontainers.Container, host string, mapped network.Port, err error) {
	if err := checkDocker(ctx, image); err != nil {
		return nil, "", network.Port{}, err
	}
	ctx, cancel := context.WithTimeout(ctx, dockerStartTimeout)
	defer cancel()
	label := rand.Text()
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("testcontainers panicked: %v", p)
		}
		if err != nil {
			err = errors.Join(err, terminator(ctr)(), removeLabelled(label))
			ctr, host, mapped = nil, "", network.Port{}
			err = fmt.Errorf("backends: docker unavailable: starting %s: %w", image, err)
		}
	}()
	if ctr, err = run(ctx, testcontainers.WithLabels(map[string]string{startLabel: label})); err != nil {
		return ctr, "", network.Port{}, err
	}
	if host, err = ctr.Host(ctx); err != nil {
		return ctr, "", network.Port{}, err
	}
	mapped, err = ctr.MappedPort(ctx, port)
	return ctr, loopback(host), mapped, err
}

// terminator returns a func that stops and removes ctr, at once: the server
// holds nothing worth a clean shutdown. Calling it twice is harmless.
func terminator(ctr testcontainers.Container) func() error {
	var once sync.Once
	var err error
	return func() error {
		once.Do(func() {
			err = guard(context.Background(), func() error {
				return testcontainers.TerminateContainer(ctr, testcontainers.StopTimeout(0))
			})
		})
		return err
	}
}

// removeLabelled removes the containers of one start, by its label.
func removeLabelled(label string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return guard(ctx, func() error {
		cli, err := testcontainers.NewDockerClientWithOpts(ctx)
		if err != nil {
			return err
		}
		defer cli.Close()
		list, err := cli.ContainerList(ctx, client.ContainerListOptions{
			All: true, Filters: make(client.Filters).Add("label", startLabel+"="+label)})
		if err != nil {
			return err
		}
		var errs []error
		for _, c := range list.Items {
			_, err := cli.ContainerRemove(ctx, c.ID, client.ContainerRemoveOptions{Force: true, RemoveVolumes: true})
			errs = append(errs, err)
		}
		return errors.Join(errs...)
	})
}

// checkDocker reports whether a Docker engine answers within
// dockerHealthTimeout, through testcontainers' own discovery (DOCKER_HOST,
// ~/.testcontainers.properties, docker context, default and rootless
// sockets). An engine named by DOCKER_HOST must answer itself: silently
// using another one (testcontainers falls back to /var/run/docker.sock)
// would run the tests somewhere the user did not ask for.
func checkDocker(ctx context.Context, image string) error {
	ctx, cancel := context.WithTimeout(ctx, dockerHealthTimeout)
	defer cancel()
	cli, err := client.New(client.FromEnv)
	if err != nil {
		return fmt.Errorf("backends: docker unavailable: %w", err)
	}
	defer cli.Close()
	_, pingErr := cli.Ping(ctx, client.PingOptions{})
	if h := os.Getenv(envDockerHost); h != "" && pingErr != nil {
		return fmt.Errorf("backends: docker unavailable: %s=%s: %w", envDockerHost, h, pingErr)
	}
	dockerSetup.Do(func() { configureTestcontainers(ctx, cli, pingErr == nil, image) })
	err = guard(ctx, func() error {
		p, err := testcontainers.NewDockerProvider(testcontainers.WithLogger(quiet))
		if err != nil {
			return err
		}
		return p.Health(ctx) // closes p
	})
	if err != nil && pingErr != nil {
		err = fmt.Errorf("%w; %w", pingErr, err) // testcontainers alone says just "rootless Docker not found"
	}
	if err != nil {
		return fmt.Errorf("backends: docker unavailable: %w", err)
	}
	return nil
}

// configureTestcontainers sets, once per process and before testcontainers
// reads its configuration, what it would get wrong here. Variables the user
// set win. answered says whether cli reached the engine.
func configureTestcontainers(ctx context.Context, cli *client.Client, answered bool, image string) {
	tclog.SetDefault(quiet) // some of its lines ignore WithLogger
	if _, set := os.LookupEnv(envRyukDisabled); !set && !(answered && ryukUsable(ctx, cli, image)) {
		os.Setenv(envRyukDisabled, "true")
	}
	if _, set := os.LookupEnv(envHostOverride); !set && answered && engineOnThisHost(ctx, cli) {
		os.Setenv(envHostOverride, "127.0.0.1")
	}
}

// ryukUsable reports whether testcontainers' reaper (Ryuk) can be used
// without making a start fail that would otherwise work. Ryuk is a container
// of its own, image testcontainers/ryuk, that removes this process's
// containers when the process dies — what Close cannot do after a crash. It
// is kept when its image is already there, or when the wanted image must be
// pulled anyway (a registry is then needed regardless). It is disabled when
// the wanted image is local but Ryuk's is not (an offline engine, or local
// stand-in images): pulling it would fail, and Close — called by Main and by
// test cleanups — removes the containers on every exit but a crash.
func ryukUsable(ctx context.Context, cli *client.Client, image string) bool {
	local := func(img string) bool {
		_, err := cli.ImageInspect(ctx, img)
		return err == nil
	}
	//lint:ignore SA1019 deprecated as API, but still the image the reaper runs (it mirrors the internal value)
	return local(testcontainers.ReaperDefaultImage) || !local(image)
}

// engineOnThisHost reports whether the engine behind a unix socket runs on
// this host (same host name), so that published ports are on 127.0.0.1.
// Inside a container testcontainers assumes the engine is the outer host's
// and dials the default gateway instead — wrong when the engine runs inside
// this very container (Docker in Docker) or the container shares the host's
// network; a sibling container using the host's mounted socket sees a
// different host name and keeps testcontainers' choice.
func engineOnThisHost(ctx context.Context, cli *client.Client) bool {
	if !strings.HasPrefix(cli.DaemonHost(), "unix://") {
		return false
	}
	info, err := cli.Info(ctx, client.InfoOptions{})
	name, herr := os.Hostname()
	return err == nil && herr == nil && info.Info.Name == name
}

// guard runs f and returns its error or its panic as an error. It gives up
// when ctx ends, leaving f to finish on its own: testcontainers' engine
// discovery takes no context and may wait on an unresponsive host.
func guard(ctx context.Context, f func() error) error {
	done := make(chan error, 1)
	go func() {
		defer func() {
			if p := recover(); p != nil {
				done <- fmt.Errorf("testcontainers panicked: %v", p)
			}
		}()
		done <- f()
	}()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}
