package faults

import (
	"context"
	"database/sql"
	"fmt"

	"net/url"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jmoiron/sqlx"

	"github.com/stockguard/stockguard/bench/pgtargets"
	"github.com/stockguard/stockguard/internal/backends"
)

// startPostgres starts a durable private PostgreSQL (fsync=on,
// synchronous_commit=on, full_page_writes=on: a restart keeps every
// acknowledged commit) behind a proxy.
func startPostgres(ctx context.Context, add func(func() error)) (*server, error) {
	pg, err := backends.StartLocalPostgres(ctx, backends.DurablePostgres())
	if err != nil {
		return nil, fmt.Errorf("faults: private postgres: %w", err)
	}
	add(pg.Close)
	u, err := url.Parse(pg.DSN)
	if err != nil {
		return nil, err
	}
	proxy, err := Listen(u.Host)
	if err != nil {
		return nil, err
	}
	add(proxy.Close)
	admin, err := sql.Open("pgx", pg.DSN)
	if err != nil {
		return nil, err
	}
	admin.SetMaxOpenConns(2)
	// No idle admin connection: pgx starts a background reader when a
	// write is slow (a loaded machine) and that goroutine stays blocked in
	// Read on the idle connection until its next use, which the leak check
	// after a run would count as the run's.
	admin.SetMaxIdleConns(0)
	add(admin.Close)
	var version string
	if err := admin.QueryRowContext(ctx, "SHOW server_version").Scan(&version); err != nil {
		return nil, fmt.Errorf("faults: private postgres: %w", err)
	}
	via := *u
	via.Host = proxy.Addr
	return &server{
		backend: pgtargets.Name, proc: pg.Proc, proxy: proxy,
		desc: fmt.Sprintf("postgres: PostgreSQL %s at %s via proxy %s (durable: fsync=on, synchronous_commit=on)", version, u.Host, proxy.Addr),
		// A connection of its own per check: the admin pool's connections
		// died with a crashed server, and a server in crash recovery
		// refuses new ones (57P03) until it can serve.
		ready: func(ctx context.Context) error {
			ctx, cancel := context.WithTimeout(ctx, readyAttempt)
			defer cancel()
			conn, err := pgx.Connect(ctx, pg.DSN)
			if err != nil {
				return err
			}
			defer conn.Close(context.WithoutCancel(ctx))
			return conn.Ping(ctx)
		},
		// A crash takes the postmaster's children with it (backends.Postgres.Kill).
		crash: pg.Kill,
		// SIGTERM is PostgreSQL's smart shutdown, which waits for every
		// client to leave; a service restart (pg_ctl's default) is fast
		// shutdown, SIGINT.
		stop: syscall.SIGINT,
		killConns: func(ctx context.Context) (int, error) {
			var n int
			err := admin.QueryRowContext(ctx, "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "+
				"WHERE backend_type = 'client backend' AND pid <> pg_backend_pid()").Scan(&n)
			return n, err
		},
		readOnly: func(ctx context.Context, d time.Duration) error { return pgReadOnly(ctx, admin, d) },
		client: func(pool int) (any, func() error, error) {
			db, err := sqlx.Open("pgx", via.String())
			if err != nil {
				return nil, nil, err
			}
			db.SetMaxOpenConns(pool)
			db.SetMaxIdleConns(pool)
			return db, db.Close, nil
		},
	}, nil
}

// pgReadOnly makes every new transaction read-only for d, as a standby or
// an operator's ALTER SYSTEM would: default_transaction_read_only, applied
// to every session by a configuration reload. Writes are refused with
// 25006 read_only_sql_transaction.
func pgReadOnly(ctx context.Context, admin *sql.DB, d time.Duration) error {
	set := func(ctx context.Context, stmt string) error {
		if _, err := admin.ExecContext(ctx, stmt); err != nil {
			return err
		}
		_, err := admin.ExecContext(ctx, "SELECT pg_reload_conf()")
		return err
	}
	if err := set(ctx, "ALTER SYSTEM SET default_transaction_read_only = on"); err != nil {
		return err
	}
	sleep(ctx, d)
	// Reset even when ctx ended, and again until it takes: the window must
	// close, or every run after this one meets a read-only server. On a
	// loaded machine a new connection can time out (the admin pool keeps
	// none idle).
	uctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
	defer cancel()
	for {
		err := set(uctx, "ALTER SYSTEM RESET default_transaction_read_only")
		if err == nil || uctx.Err() != nil {
			return err
		}
		sleep(uctx, 100*time.Millisecond)
	}
}
