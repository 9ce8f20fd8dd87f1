// Command seckill is a flash-sale HTTP service over any stockguard
// strategy, with Prometheus metrics and OpenTelemetry traces. Run two
// copies against one MariaDB or Redis, as behind a load balancer; see
// README.md.
package main

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/XSAM/otelsql"
	"github.com/go-sql-driver/mysql"
	"github.com/jmoiron/sqlx"
	"github.com/redis/go-redis/extra/redisotel/v9"
	"github.com/redis/go-redis/v9"
	"go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp"
	"go.opentelemetry.io/otel/propagation"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"

	"github.com/stockguard/stockguard"
	"github.com/stockguard/stockguard/stockotel"
	"github.com/stockguard/stockguard/strategy"
	"github.com/stockguard/stockguard/tiered"
)

// Secrets come from the environment, never from flags: a flag shows in
// ps.
const (
	// envAdminToken holds the admin token; unset, administration is off.
	envAdminToken = "SECKILL_ADMIN_TOKEN"
	// envMySQLDSN holds the MySQL DSN (with its password) when
	// -mysql-dsn is not given.
	envMySQLDSN = "SECKILL_MYSQL_DSN"
)

// minAdminTokenLen is the shortest admin token accepted: 128 bits of hex,
// as `openssl rand -hex 16` makes.
const minAdminTokenLen = 32

// defaultMaxTokenTTL is how far ahead a buyer token may expire by
// default (-buyer-token-max-ttl).
const defaultMaxTokenTTL = 24 * time.Hour

// defaultAdminAddr is the admin listener's address by default, and the
// one -admin-addr "" stands for.
const defaultAdminAddr = "127.0.0.1:9090"

// defaultMySQLDSN is the DSN when neither -mysql-dsn nor
// SECKILL_MYSQL_DSN gives one.
const defaultMySQLDSN = "root@tcp(127.0.0.1:3306)/test?interpolateParams=true"

type config struct {
	role      string
	addr      string
	adminAddr string
	// adminTokenFile holds the admin token instead of SECKILL_ADMIN_TOKEN.
	adminTokenFile string
	strategy       string
	allowOversell  bool
	mysqlDSN       string
	redisAddr      string
	// acceptRedisLoss names the Redis persistence settings the operator
	// accepts beyond appendfsync always (durability.go).
	acceptRedisLoss string
	table           string
	prefix          string
	opTimeout       time.Duration
	holdTTL         time.Duration
	grace           time.Duration
	drainDelay      time.Duration
	maxConns        int
	maxQty          int64
	buyerCap        int64
	maxTokenTTL     time.Duration
	revokeRefresh   time.Duration
	traceStdout     bool
	accessLog       bool
	// The tiered strategy's consumer (consumer.go).
	consume      bool
	setupFront   bool // tiered-mysql: Setup a new deployment's front at start
	consumerName string
	claimIdle    time.Duration
}

// The -role values.
const (
	roleService  = "service"
	roleConsumer = "consumer"
)

// tieredStrategy is the strategy with a consumer.
const tieredStrategy = "tiered-mysql"

// counterexample is the deliberately broken strategy.
const counterexample = "mutex-counterexample"

// Server timeouts. The write timeout covers the longest a request may
// legitimately take — its body read, its inventory call and its reply —
// and each handler also gives its reply a deadline of its own once the
// call returned (replyTimeout).
const (
	readHeaderTimeout = 5 * time.Second
	readTimeout       = 10 * time.Second
	idleTimeout       = 60 * time.Second
)

func main() {
	var cfg config
	flag.StringVar(&cfg.addr, "addr", "127.0.0.1:8080", "listen address of the buyers' API (of /metrics and /healthz with -role consumer)")
	flag.StringVar(&cfg.adminAddr, "admin-addr", defaultAdminAddr, "listen address of the admin API and /metrics: keep it off the public network; without a host (\":9090\")\n"+
		"it is on 127.0.0.1 (name 0.0.0.0 or [::] for every interface)")
	flag.StringVar(&cfg.adminTokenFile, "admin-token-file", "", "file holding the admin token (a trailing newline is not part of it), instead of $"+envAdminToken)
	flag.StringVar(&cfg.strategy, "strategy", "redis-atomic", "stock strategy, one with exactly-once orders: "+orderStrategies())
	flag.BoolVar(&cfg.allowOversell, "allow-oversell", false, "start -strategy "+counterexample+", which oversells across copies and takes buys without order IDs")
	flag.StringVar(&cfg.mysqlDSN, "mysql-dsn", "", "MariaDB/MySQL DSN (mysql-* and tiered-mysql); default $"+envMySQLDSN+", else "+defaultMySQLDSN)
	flag.StringVar(&cfg.redisAddr, "redis-addr", "127.0.0.1:6379", "Redis address (redis-*, tiered-mysql, "+counterexample+")")
	flag.StringVar(&cfg.table, "mysql-table", "stock", "MySQL stock table")
	flag.StringVar(&cfg.prefix, "redis-prefix", "seckill:", "Redis key prefix")
	flag.StringVar(&cfg.acceptRedisLoss, "accept-redis-loss", acceptNoLoss, "Redis persistence that can lose acknowledged orders, accepted: "+acceptEverysec+
		" (appendfsync everysec) or "+acceptAny+" (any settings, unchecked); by default the service needs appendonly yes, appendfsync always")
	flag.DurationVar(&cfg.opTimeout, "op-timeout", 5*time.Second, "bound on one inventory call (> 0)")
	flag.DurationVar(&cfg.holdTTL, "hold-ttl", 15*time.Minute, "how long a hold (buy with \"hold\": true) waits for Confirm")
	flag.DurationVar(&cfg.grace, "grace", 20*time.Second, "how long shutdown waits for requests in flight")
	flag.DurationVar(&cfg.drainDelay, "drain-delay", 5*time.Second, "on SIGTERM, how long /readyz answers 503 draining while the listeners still serve, before they close (a second signal ends it)")
	flag.IntVar(&cfg.maxConns, "max-conns", 64, "backend connection pool size")
	flag.Int64Var(&cfg.maxQty, "max-qty", defaultMaxQty, "most units one order may take")
	flag.Int64Var(&cfg.buyerCap, "buyer-cap", defaultBuyerCap, "a registered buyer's allowance: the most units it may have out on open orders, held or taken")
	flag.DurationVar(&cfg.maxTokenTTL, "buyer-token-max-ttl", defaultMaxTokenTTL, "a buyer token must expire within this of now: one the login made to last longer is refused")
	flag.DurationVar(&cfg.revokeRefresh, "revocation-refresh", time.Second, "how long a copy trusts its read of a buyer's token revocation: a revocation holds on every copy within it")
	flag.BoolVar(&cfg.traceStdout, "trace-stdout", false, "export every span to stderr")
	flag.BoolVar(&cfg.accessLog, "access-log", true, "log every request at INFO, with its request and trace IDs")
	flag.StringVar(&cfg.role, "role", roleService, "service (the HTTP API) or consumer (the "+tieredStrategy+" consumer alone, serving /metrics and /healthz)")
	flag.BoolVar(&cfg.setupFront, "setup-front", false, tieredStrategy+": set the front up at start when the deployment is new (tiered.Orders.Setup; a no-op on a front set up); a front that lost its data\n"+
		"while the back holds stock is refused, to be recovered (docs/tiered-recovery.md), never set up again")
	flag.BoolVar(&cfg.consume, "consume", true, tieredStrategy+": run the consumer in the service too; false when consumer processes (-role consumer) do")
	flag.StringVar(&cfg.consumerName, "consumer-name", "", "the consumer's name in the stream's group, unique among the live ones; a restarted copy under its old name\n"+
		"takes its unacknowledged entries back at once (default: a random one; those of a copy gone wait -claim-idle for another)")
	flag.DurationVar(&cfg.claimIdle, "claim-idle", tiered.DefaultClaimIdle, "how long a consumer's unacknowledged entries wait before another consumer claims them")
	flag.Parse()
	if cfg.mysqlDSN == "" {
		cfg.mysqlDSN = cmp.Or(os.Getenv(envMySQLDSN), defaultMySQLDSN)
	}

	log := slog.New(slog.NewJSONHandler(os.Stderr, nil))
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, cfg, log); err != nil {
		log.Error("seckill stopped", "err", err)
		os.Exit(1)
	}
}

// check refuses, before anything is opened, a configuration the service
// would run badly on.
func (cfg config) check(buyerKey string) error {
	if cfg.role == roleConsumer {
		return nil
	}
	if cfg.role != roleService {
		return fmt.Errorf("unknown -role %q, want %s or %s", cfg.role, roleService, roleConsumer)
	}
	spec, ok := strategies[cfg.strategy]
	switch {
	case !ok:
		return fmt.Errorf("unknown -strategy %q, want one of %s", cfg.strategy, orderStrategies())
	case cfg.strategy == counterexample && !cfg.allowOversell:
		return fmt.Errorf("-strategy %s oversells across copies and cannot take a buy exactly-once: it starts only with -allow-oversell", counterexample)
	case !spec.orders && cfg.strategy != counterexample:
		return fmt.Errorf("-strategy %s keeps no orders, so a retried buy would take its units again: the service needs exactly-once orders, one of %s",
			cfg.strategy, orderStrategies())
	case cfg.acceptRedisLoss != acceptNoLoss && cfg.acceptRedisLoss != acceptEverysec && cfg.acceptRedisLoss != acceptAny:
		return fmt.Errorf("-accept-redis-loss %q: want %s or %s", cfg.acceptRedisLoss, acceptEverysec, acceptAny)
	case cfg.maxTokenTTL < time.Second:
		return fmt.Errorf("-buyer-token-max-ttl %v: want at least 1s", cfg.maxTokenTTL)
	case cfg.drainDelay < 0:
		return fmt.Errorf("-drain-delay %v: want >= 0", cfg.drainDelay)
	case cfg.opTimeout <= 0:
		return fmt.Errorf("-op-timeout %v: want > 0", cfg.opTimeout)
	case cfg.maxQty < 1 || cfg.maxQty > stockguard.MaxQty:
		return fmt.Errorf("-max-qty %d: want 1…%d", cfg.maxQty, int64(stockguard.MaxQty))
	case cfg.buyerCap < cfg.maxQty || cfg.buyerCap > stockguard.MaxQty:
		return fmt.Errorf("-buyer-cap %d: want -max-qty (%d)…%d", cfg.buyerCap, cfg.maxQty, int64(stockguard.MaxQty))
	case len(buyerKey) < minBuyerKeyLen:
		return fmt.Errorf("%s must hold the buyer-token key, at least %d bytes", envBuyerKey, minBuyerKeyLen)
	}
	if err := strategy.ValidateTTL(cfg.holdTTL); err != nil {
		return fmt.Errorf("-hold-ttl: %w", err)
	}
	return nil
}

func run(ctx context.Context, cfg config, log *slog.Logger) error {
	buyerKey := os.Getenv(envBuyerKey)
	if err := cfg.check(buyerKey); err != nil {
		return err
	}
	adminToken, err := readAdminToken(os.Getenv(envAdminToken), cfg.adminTokenFile)
	if err != nil {
		return err
	}
	spec := strategies[cfg.strategy]
	if cfg.role == roleConsumer {
		spec = strategies[tieredStrategy]
	}
	ln, err := net.Listen("tcp", cfg.addr)
	if err != nil {
		return err
	}
	tel, err := newTelemetry(cfg.traceStdout, ln.Addr().String())
	if err != nil {
		return errors.Join(err, ln.Close())
	}

	var db *sqlx.DB
	var rdb *redis.Client
	// A backend that does not answer at start is waited for: the service
	// starts, answers 503 (and /readyz 503) until it is back. One that
	// answers with a refusal (a wrong password, settings that lose
	// orders) stops it: waiting would not mend that.
	schema := &pending{}
	if spec.mysql {
		if db, err = openMySQL(cfg); err != nil {
			return err
		}
		defer db.Close()
		if err := createSchema(ctx, db, cfg.table); err != nil {
			var refused *mysql.MySQLError
			if errors.As(err, &refused) || ctx.Err() != nil {
				return err
			}
			log.Warn("mysql does not answer: serving, not ready until its tables are created", "err", err)
			schema.set(err)
			go waitForSchema(ctx, db, cfg.table, schema, log)
		}
	}
	if spec.redis {
		if rdb, err = openRedis(cfg); err != nil {
			return err
		}
		defer rdb.Close()
		// The first connection checks Redis's persistence settings too.
		if err := rdb.Ping(ctx).Err(); errors.Is(err, errLossyRedis) {
			return fmt.Errorf("redis %s: %w", cfg.redisAddr, err)
		} else if err != nil {
			log.Warn("redis does not answer: serving, not ready until it does", "err", err)
		}
		if cfg.role == roleService && cfg.acceptRedisLoss != acceptNoLoss {
			log.Warn("Redis may lose acknowledged orders in a crash: accepted by -accept-redis-loss", "accept_redis_loss", cfg.acceptRedisLoss)
		}
	}

	var consumer *tiered.Consumer
	if cfg.role == roleConsumer || cfg.strategy == tieredStrategy && cfg.consume {
		if consumer, err = newConsumer(db, rdb, cfg); err != nil {
			return err
		}
	}
	var api *server // nil for a consumer
	servers := []*http.Server{}
	served := make(chan error, 2)
	serve := func(ln net.Listener, h http.Handler, public bool) {
		srv := httpServer(h, ln.Addr().String(), cfg, log, public)
		servers = append(servers, srv)
		go func() { served <- srv.Serve(ln) }()
	}
	if cfg.role == roleConsumer {
		mux := http.NewServeMux()
		mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusNoContent) })
		mux.Handle("GET /metrics", tel.handler())
		serve(ln, mux, false)
	} else {
		adminLn, err := net.Listen("tcp", loopbackByDefault(cfg.adminAddr))
		if err != nil {
			return errors.Join(err, ln.Close())
		}
		inner, err := spec.build(db, rdb, cfg)
		if err != nil {
			return errors.Join(err, ln.Close(), adminLn.Close())
		}
		if front, ok := inner.(*tiered.Orders); ok && cfg.setupFront {
			if err := setUpFront(ctx, front, rdb, db, cfg); err != nil {
				return errors.Join(err, ln.Close(), adminLn.Close())
			}
		}
		var epochKey string
		if _, ok := inner.(*tiered.Orders); ok {
			epochKey = tiered.EpochKey(tiered.StreamKey(cfg.prefix))
		}
		srv := &server{opTimeout: cfg.opTimeout, holdTTL: cfg.holdTTL, maxQty: cfg.maxQty, buyerCap: cfg.buyerCap, maxTokenTTL: cfg.maxTokenTTL,
			buyerKey: []byte(buyerKey), log: log, warnings: newLimiter(warnBurst, warnEvery), revocations: newRevocations(cfg.revokeRefresh), adminToken: adminToken, ready: readiness(db, rdb, cfg.acceptRedisLoss, epochKey, schema)}
		api = srv
		srv.inv, srv.orders = instrument(inner, stockotel.WithStrategy(cfg.strategy))
		if srv.orders == nil {
			log.Warn("this strategy oversells across copies and cannot take a buy exactly-once: a demonstration, never a deployment",
				"strategy", cfg.strategy)
		}
		serve(ln, srv.publicRoutes(), true)
		serve(adminLn, srv.adminRoutes(tel.handler()), false)
		log.Info("serving", "strategy", cfg.strategy, "orders", srv.orders != nil, "admin", srv.adminToken != "", "consumer", consumer != nil,
			"admin_addr", adminLn.Addr().String(), "max_qty", cfg.maxQty, "buyer_cap", cfg.buyerCap)
	}
	// The consumer stops after the HTTP servers: the orders of the last
	// requests answered are on the stream by then, and a lone copy applies
	// them before it exits.
	cctx, stopConsumer := context.WithCancel(context.WithoutCancel(ctx))
	defer stopConsumer()
	consumed := make(chan error, 1)
	if consumer != nil {
		go func() { consumed <- consume(cctx, consumer, log) }()
	}
	log.Info("listening", "addr", ln.Addr().String(), "role", cfg.role)

	closeAll := func() error {
		var err error
		for _, srv := range servers {
			err = errors.Join(err, srv.Close())
		}
		return err
	}
	select {
	case err := <-served:
		return errors.Join(err, closeAll())
	case err := <-consumed:
		return errors.Join(err, closeAll())
	case <-ctx.Done():
	}
	if api != nil && cfg.drainDelay > 0 {
		// The load balancer reads /readyz, sees 503 and stops sending
		// requests; only then do the listeners close. A second signal
		// ends the delay.
		again := make(chan os.Signal, 1)
		signal.Notify(again, os.Interrupt, syscall.SIGTERM)
		api.draining.Store(true)
		log.Info("draining", "delay", cfg.drainDelay.String())
		select {
		case <-time.After(cfg.drainDelay):
		case <-again:
		}
		signal.Stop(again)
	}
	// Shutdown stops accepting, then waits for every request in flight to
	// be answered: a buyer told 200 has an order, and no request is cut
	// between its inventory call and its reply. Then the consumer finishes
	// its batch; only after that do the backends close (the deferred Close
	// calls).
	log.Info("shutting down", "grace", cfg.grace.String())
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cfg.grace)
	defer cancel()
	for _, srv := range servers {
		err = errors.Join(err, srv.Shutdown(sctx))
	}
	clean := err == nil
	for range servers {
		if !errors.Is(<-served, http.ErrServerClosed) {
			clean = false
		}
	}
	if clean {
		log.Info("stopped; every request answered")
	}
	if consumer != nil {
		stopConsumer()
		err = errors.Join(err, <-consumed)
	}
	return errors.Join(err, tel.shutdown(sctx))
}

// setUpFront sets the tiered front up on a new deployment only. A front
// without its epoch key is either new or one that lost its data (a
// restart without persistence); Setup would arm a lost one again, and the
// orders it had acknowledged would answer 404 while their units sold
// again. The back tells the two apart: a new deployment's has no stock.
func setUpFront(ctx context.Context, front *tiered.Orders, rdb *redis.Client, db *sqlx.DB, cfg config) error {
	armed, err := rdb.Exists(ctx, tiered.EpochKey(tiered.StreamKey(cfg.prefix))).Result()
	if err != nil {
		return fmt.Errorf("-setup-front: reading the front's epoch: %w", err)
	}
	if armed == 0 {
		var stocked bool
		if err := db.GetContext(ctx, &stocked, "SELECT EXISTS (SELECT 1 FROM `"+cfg.table+"`)"); err != nil {
			return fmt.Errorf("-setup-front: reading the back: %w", err)
		}
		if stocked {
			return errors.New("-setup-front: the tiered front has lost its data (no epoch key) while the back holds stock: " +
				"recover it from the back (tiered.Orders.Recover, docs/tiered-recovery.md) rather than set it up again")
		}
	}
	return front.Setup(ctx)
}

// httpServer serves h on the listener at addr. otelhttp names the server
// by addr, not by the client's Host header: the metrics' labels are the
// service's to choose, so that no client can grow their series. On the
// public listener it reads no trace context from the request: a client's
// traceparent would have its trace sampled (and printed by -trace-stdout)
// and its baggage carried along; the admin listener's callers are the
// shop's own.
func httpServer(h http.Handler, addr string, cfg config, log *slog.Logger, public bool) *http.Server {
	opts := []otelhttp.Option{otelhttp.WithServerName(addr),
		otelhttp.WithSpanNameFormatter(func(_ string, r *http.Request) string { return r.Method + " " + r.Pattern })}
	if public {
		opts = append(opts, otelhttp.WithPropagators(propagation.NewCompositeTextMapPropagator()))
	}
	if cfg.accessLog {
		h = accessLog(log, h) // inside otelhttp: the request's span is known
	}
	return &http.Server{
		Handler:           otelhttp.NewHandler(h, "seckill", opts...),
		ReadHeaderTimeout: readHeaderTimeout,
		ReadTimeout:       readTimeout,
		WriteTimeout:      readTimeout + cfg.opTimeout + replyTimeout,
		IdleTimeout:       idleTimeout,
		MaxHeaderBytes:    16 << 10,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}
}

// readAdminToken returns the admin token from the environment or, when
// file is given, from the file, without the trailing newline a file ends
// with; "" turns administration off. A short token is refused: the admin
// calls set the stock.
func readAdminToken(env, file string) (string, error) {
	token := env
	if file != "" {
		if env != "" {
			return "", fmt.Errorf("both %s and -admin-token-file are set: give the admin token once", envAdminToken)
		}
		raw, err := os.ReadFile(file)
		if err != nil {
			return "", fmt.Errorf("-admin-token-file: %w", err)
		}
		token = strings.TrimRight(string(raw), "\r\n")
		if token == "" {
			return "", fmt.Errorf("-admin-token-file %s is empty", file)
		}
	}
	if token != "" && len(token) < minAdminTokenLen {
		return "", fmt.Errorf("the admin token is %d bytes, want at least %d (openssl rand -hex 16)", len(token), minAdminTokenLen)
	}
	return token, nil
}

// loopbackByDefault is addr with 127.0.0.1 for a missing host, and
// defaultAdminAddr for "": net.Listen would bind those on every interface.
func loopbackByDefault(addr string) string {
	if addr == "" {
		return defaultAdminAddr
	}
	host, port, err := net.SplitHostPort(addr)
	if err != nil || host != "" {
		return addr // net.Listen says what is wrong with it
	}
	return net.JoinHostPort("127.0.0.1", port)
}

// errFrontLost is a tiered front without its epoch key: it lost its data.
var errFrontLost = errors.New("the tiered front lost its data (no epoch key): recover it from the back (docs/tiered-recovery.md)")

// readiness pings the backends the strategy uses, checks that the MySQL
// tables were created (schema), checks Redis's persistence settings again
// (they can be changed at run time, CONFIG SET) and, for a tiered front,
// that the front has its epoch key (epochKey, "" for other strategies).
func readiness(db *sqlx.DB, rdb *redis.Client, acceptRedisLoss, epochKey string, schema *pending) func(context.Context) error {
	return func(ctx context.Context) error {
		var err error
		if db != nil {
			err = errors.Join(db.PingContext(ctx), schema.get())
		}
		if rdb != nil {
			err = errors.Join(err, rdb.Ping(ctx).Err(), redisDurable(ctx, rdb, acceptRedisLoss))
		}
		if epochKey != "" && err == nil {
			switch n, xerr := rdb.Exists(ctx, epochKey).Result(); {
			case xerr != nil:
				err = xerr
			case n == 0:
				err = errFrontLost
			}
		}
		return err
	}
}

// pending is the error of a start-up step not done yet; nil once done.
type pending struct {
	mu  sync.Mutex
	err error
}

func (p *pending) get() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.err
}

func (p *pending) set(err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.err = err
}

// schemaRetry is how often the tables are tried again while MySQL does
// not answer.
const schemaRetry = time.Second

// waitForSchema creates the MySQL tables once MySQL answers, or until ctx
// ends, keeping the last error in schema.
func waitForSchema(ctx context.Context, db *sqlx.DB, table string, schema *pending, log *slog.Logger) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-time.After(schemaRetry):
		}
		err := createSchema(ctx, db, table)
		schema.set(err)
		if err == nil {
			log.Info("mysql answers: tables created")
			return
		}
	}
}

// openMySQL opens the pool through otelsql, so every statement is a span
// and the pool's stats are metrics.
func openMySQL(cfg config) (*sqlx.DB, error) {
	sqlDB, err := otelsql.Open("mysql", cfg.mysqlDSN, otelsql.WithAttributes(semconv.DBSystemNameMySQL))
	if err != nil {
		return nil, err
	}
	if _, err := otelsql.RegisterDBStatsMetrics(sqlDB, otelsql.WithAttributes(semconv.DBSystemNameMySQL)); err != nil {
		return nil, errors.Join(err, sqlDB.Close())
	}
	sqlDB.SetMaxOpenConns(cfg.maxConns)
	sqlDB.SetMaxIdleConns(cfg.maxConns)
	return sqlx.NewDb(sqlDB, "mysql"), nil
}

// openRedis opens the client with go-redis's own instrumentation. The
// service's client checks Redis's persistence settings on every new
// connection (onConnect), the first one included, so that the service
// neither starts nor sells on a Redis that can lose an acknowledged order;
// a consumer acknowledges nothing to a buyer and skips the check.
func openRedis(cfg config) (*redis.Client, error) {
	// ContextTimeoutEnabled: a call's deadline (-op-timeout) bounds its
	// socket reads and writes too, rather than go-redis's own 5 s timeouts.
	opts := &redis.Options{Addr: cfg.redisAddr, PoolSize: cfg.maxConns, ContextTimeoutEnabled: true}
	if cfg.role == roleService {
		opts.OnConnect = onConnect(cfg.acceptRedisLoss)
	}
	rdb := redis.NewClient(opts)
	if err := errors.Join(redisotel.InstrumentTracing(rdb), redisotel.InstrumentMetrics(rdb)); err != nil {
		return nil, errors.Join(err, rdb.Close())
	}
	return rdb, nil
}
