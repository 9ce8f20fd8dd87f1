// Command seckill is a flash-sale HTTP service over any stockguard
// strategy, with Prometheus metrics and OpenTelemetry traces. Run two
// copies against one MariaDB or Redis, as behind a load balancer; see
// README.md.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/XSAM/otelsql"
	_ "github.com/go-sql-driver/mysql"
	"github.com/jmoiron/sqlx"
	"github.com/redis/go-redis/extra/redisotel/v9"
	"github.com/redis/go-redis/v9"
	"go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"

	"github.com/stockguard/stockguard"
	"github.com/stockguard/stockguard/stockotel"
	"github.com/stockguard/stockguard/tiered"
)

// envAdminToken names the environment variable holding the admin token
// (not a flag: a flag shows in ps). Unset, administration is off.
const envAdminToken = "SECKILL_ADMIN_TOKEN"

type config struct {
	role        string
	addr        string
	strategy    string
	mysqlDSN    string
	redisAddr   string
	table       string
	prefix      string
	opTimeout   time.Duration
	holdTTL     time.Duration
	grace       time.Duration
	maxConns    int
	traceStdout bool
	// The tiered strategy's consumer (consumer.go).
	consume      bool
	setupFront   bool // tiered-mysql: Setup the front at start
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

func main() {
	var cfg config
	flag.StringVar(&cfg.addr, "addr", "127.0.0.1:8080", "listen address")
	flag.StringVar(&cfg.strategy, "strategy", "redis-atomic", "stock strategy: "+strategyNames())
	flag.StringVar(&cfg.mysqlDSN, "mysql-dsn", "root@tcp(127.0.0.1:3306)/test?interpolateParams=true", "MariaDB/MySQL DSN (mysql-* and tiered-mysql)")
	flag.StringVar(&cfg.redisAddr, "redis-addr", "127.0.0.1:6379", "Redis address (redis-*, tiered-mysql, mutex-counterexample)")
	flag.StringVar(&cfg.table, "mysql-table", "stock", "MySQL stock table")
	flag.StringVar(&cfg.prefix, "redis-prefix", "seckill:", "Redis key prefix")
	flag.DurationVar(&cfg.opTimeout, "op-timeout", 5*time.Second, "bound on one inventory call")
	flag.DurationVar(&cfg.holdTTL, "hold-ttl", 15*time.Minute, "how long a hold (buy with \"hold\": true) waits for Confirm")
	flag.DurationVar(&cfg.grace, "grace", 20*time.Second, "how long shutdown waits for requests in flight")
	flag.IntVar(&cfg.maxConns, "max-conns", 64, "backend connection pool size")
	flag.BoolVar(&cfg.traceStdout, "trace-stdout", false, "export every span to stderr")
	flag.StringVar(&cfg.role, "role", roleService, "service (the HTTP API) or consumer (the "+tieredStrategy+" consumer alone, serving /metrics and /healthz)")
	flag.BoolVar(&cfg.setupFront, "setup-front", true, tieredStrategy+": set the front up at start (tiered.Orders.Setup; a no-op on a front set up); false where the front is set up once at deployment, so that a front restarted empty is refused until it is recovered (docs/tiered.md)")
	flag.BoolVar(&cfg.consume, "consume", true, tieredStrategy+": run the consumer in the service too; false when consumer processes (-role consumer) do")
	flag.StringVar(&cfg.consumerName, "consumer-name", "", "the consumer's name in the stream's group, unique among the live ones; a restarted copy under its old name\n"+
		"takes its unacknowledged entries back at once (default: a random one; those of a copy gone wait -claim-idle for another)")
	flag.DurationVar(&cfg.claimIdle, "claim-idle", tiered.DefaultClaimIdle, "how long a consumer's unacknowledged entries wait before another consumer claims them")
	flag.Parse()

	log := slog.New(slog.NewJSONHandler(os.Stderr, nil))
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, cfg, log); err != nil {
		log.Error("seckill stopped", "err", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, cfg config, log *slog.Logger) error {
	spec, ok := strategies[cfg.strategy]
	switch {
	case cfg.role == roleConsumer:
		spec = strategies[tieredStrategy]
	case cfg.role != roleService:
		return fmt.Errorf("unknown -role %q, want %s or %s", cfg.role, roleService, roleConsumer)
	case !ok:
		return fmt.Errorf("unknown -strategy %q, want one of %s", cfg.strategy, strategyNames())
	}
	ln, err := net.Listen("tcp", cfg.addr)
	if err != nil {
		return err
	}
	tel, err := newTelemetry(cfg.traceStdout, ln.Addr().String())
	if err != nil {
		return err
	}

	var db *sqlx.DB
	var rdb *redis.Client
	if spec.mysql {
		if db, err = openMySQL(ctx, cfg); err != nil {
			return err
		}
		defer db.Close()
	}
	if spec.redis {
		if rdb, err = openRedis(ctx, cfg); err != nil {
			return err
		}
		defer rdb.Close()
	}

	var handler http.Handler
	var consumer *tiered.Consumer
	if cfg.role == roleConsumer || cfg.strategy == tieredStrategy && cfg.consume {
		if consumer, err = newConsumer(db, rdb, cfg); err != nil {
			return err
		}
	}
	if cfg.role == roleConsumer {
		mux := http.NewServeMux()
		mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusNoContent) })
		mux.Handle("GET /metrics", tel.handler())
		handler = mux
	} else {
		inner := spec.build(db, rdb, cfg)
		if front, ok := inner.(*tiered.Orders); ok && cfg.setupFront {
			if err := front.Setup(ctx); err != nil {
				return err
			}
		}
		srv := &server{opTimeout: cfg.opTimeout, holdTTL: cfg.holdTTL, log: log, adminToken: os.Getenv(envAdminToken)}
		opts := []stockotel.Option{stockotel.WithStrategy(cfg.strategy)}
		if orders, ok := inner.(stockguard.Orders); ok {
			wrapped := stockotel.WrapOrders(orders, opts...)
			srv.inv, srv.orders = wrapped, wrapped
		} else {
			srv.inv = stockotel.Wrap(inner, opts...)
		}
		handler = srv.routes(tel.handler())
		log.Info("serving", "strategy", cfg.strategy, "orders", srv.orders != nil, "admin", srv.adminToken != "", "consumer", consumer != nil)
	}

	httpSrv := &http.Server{
		Handler: otelhttp.NewHandler(handler, "seckill",
			otelhttp.WithSpanNameFormatter(func(_ string, r *http.Request) string { return r.Method + " " + r.Pattern })),
		ReadHeaderTimeout: 5 * time.Second,
		ReadTimeout:       10 * time.Second,
		WriteTimeout:      cfg.opTimeout + 5*time.Second,
		IdleTimeout:       60 * time.Second,
		MaxHeaderBytes:    16 << 10,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}
	served := make(chan error, 1)
	go func() { served <- httpSrv.Serve(ln) }()
	// The consumer stops after the HTTP server: the orders of the last
	// requests answered are on the stream by then, and a lone copy applies
	// them before it exits.
	cctx, stopConsumer := context.WithCancel(context.WithoutCancel(ctx))
	defer stopConsumer()
	consumed := make(chan error, 1)
	if consumer != nil {
		go func() { consumed <- consume(cctx, consumer, log) }()
	}
	log.Info("listening", "addr", ln.Addr().String(), "role", cfg.role)

	select {
	case err := <-served:
		return err
	case err := <-consumed:
		return errors.Join(err, httpSrv.Close())
	case <-ctx.Done():
	}
	// Shutdown stops accepting, then waits for every request in flight to
	// be answered: a buyer told 200 has an order, and no request is cut
	// between its inventory call and its reply. Then the consumer finishes
	// its batch; only after that do the backends close (the deferred Close
	// calls).
	log.Info("shutting down", "grace", cfg.grace)
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cfg.grace)
	defer cancel()
	err = httpSrv.Shutdown(sctx)
	if errors.Is(<-served, http.ErrServerClosed) && err == nil {
		log.Info("stopped; every request answered")
	}
	if consumer != nil {
		stopConsumer()
		err = errors.Join(err, <-consumed)
	}
	return errors.Join(err, tel.shutdown(sctx))
}

// openMySQL opens the pool through otelsql, so every statement is a span
// and the pool's stats are metrics, and creates the tables.
func openMySQL(ctx context.Context, cfg config) (*sqlx.DB, error) {
	sqlDB, err := otelsql.Open("mysql", cfg.mysqlDSN, otelsql.WithAttributes(semconv.DBSystemNameMySQL))
	if err != nil {
		return nil, err
	}
	if _, err := otelsql.RegisterDBStatsMetrics(sqlDB, otelsql.WithAttributes(semconv.DBSystemNameMySQL)); err != nil {
		return nil, errors.Join(err, sqlDB.Close())
	}
	sqlDB.SetMaxOpenConns(cfg.maxConns)
	sqlDB.SetMaxIdleConns(cfg.maxConns)
	db := sqlx.NewDb(sqlDB, "mysql")
	if err := createSchema(ctx, db, cfg.table); err != nil {
		return nil, errors.Join(err, db.Close())
	}
	return db, nil
}

// openRedis opens the client with go-redis's own instrumentation.
func openRedis(ctx context.Context, cfg config) (*redis.Client, error) {
	rdb := redis.NewClient(&redis.Options{Addr: cfg.redisAddr, PoolSize: cfg.maxConns})
	if err := errors.Join(redisotel.InstrumentTracing(rdb), redisotel.InstrumentMetrics(rdb)); err != nil {
		return nil, errors.Join(err, rdb.Close())
	}
	if err := rdb.Ping(ctx).Err(); err != nil {
		return nil, errors.Join(fmt.Errorf("redis %s: %w", cfg.redisAddr, err), rdb.Close())
	}
	return rdb, nil
}
