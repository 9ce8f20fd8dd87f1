package pgtargets

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net/url"
	"time"

	"github.com/jackc/pgx/v5"
	_ "github.com/jackc/pgx/v5/stdlib" // the "pgx" database/sql driver
	"github.com/jmoiron/sqlx"

	"github.com/stockguard/stockguard/bench"
	"github.com/stockguard/stockguard/internal/backends"
)

// Name is the PostgreSQL backend's name in targets' Needs and in
// bench.Servers.
const Name = "postgres"

// Backend is the PostgreSQL backend: the server -postgres-dsn names, else
// the one package backends resolves (STOCKGUARD_POSTGRES_DSN, else a
// private server from initdb/postgres on PATH or in
// /usr/lib/postgresql/*/bin, stopped at Close, else Docker in a binary that
// has it).
var Backend = bench.Backend{
	Name:  Name,
	About: "PostgreSQL: -postgres-dsn, else STOCKGUARD_POSTGRES_DSN, else a private server from initdb/postgres (PATH or /usr/lib/postgresql/*/bin)",
	Flags: func(fs *flag.FlagSet) bench.Opener {
		dsn := fs.String("postgres-dsn", "", "PostgreSQL URL, e.g. postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable (default: resolved, see Backends)")
		durable := fs.Bool("postgres-durable", false, "durable PostgreSQL: a private server runs with fsync=on, synchronous_commit=on, full_page_writes=on;\n"+
			"any other server must already be so (default: a private server runs with all three off)")
		return bench.Opener{
			Check: func() error {
				if *dsn == "" {
					return nil
				}
				if _, err := pgx.ParseConfig(*dsn); err != nil {
					return fmt.Errorf("-postgres-dsn: %w", err)
				}
				return nil
			},
			Open: func(ctx context.Context, c bench.OpenConfig) (*bench.Opened, error) {
				return open(ctx, *dsn, *durable, c)
			},
		}
	},
}

// resolveTimeout bounds finding or starting the server (a Docker pull
// included).
const resolveTimeout = 3 * time.Minute

// open connects to the server dsn names, or to one package backends
// resolves when dsn is empty, with a database/sql pool and round trip as oc
// says.
func open(ctx context.Context, dsn string, durable bool, oc bench.OpenConfig) (_ *bench.Opened, err error) {
	var closers []func() error
	closeAll := func() error {
		var errs []error
		for i := len(closers) - 1; i >= 0; i-- {
			errs = append(errs, closers[i]())
		}
		return errors.Join(errs...)
	}
	defer func() {
		if err != nil {
			closeAll()
		}
	}()
	source := "-postgres-dsn"
	var proc *backends.Process
	if dsn == "" {
		rctx, cancel := context.WithTimeout(ctx, resolveTimeout)
		var opts []backends.PostgresOption
		if durable {
			opts = append(opts, backends.DurablePostgres())
		}
		pg, err := backends.ResolvePostgresWith(rctx, opts...)
		cancel()
		if err != nil {
			return nil, err
		}
		closers = append(closers, pg.Close)
		dsn, source, proc = pg.DSN, string(pg.Source), pg.Proc
	}
	cfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		return nil, fmt.Errorf("postgres: %w", err)
	}
	addr := fmt.Sprintf("%s:%d", cfg.Host, cfg.Port)
	connect := dsn
	if oc.RTT != 0 {
		via, end, err := bench.Route(addr, oc.RTT)
		if err != nil {
			return nil, err
		}
		closers = append(closers, end)
		if connect, err = reroute(dsn, via); err != nil {
			return nil, err
		}
	}
	db, err := sqlx.Open("pgx", connect)
	if err != nil {
		return nil, fmt.Errorf("postgres: %w", err)
	}
	closers = append(closers, db.Close)
	db.SetMaxOpenConns(oc.Pool)
	db.SetMaxIdleConns(oc.Pool)
	pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	var version string
	if err := db.QueryRowContext(pctx, "SHOW server_version").Scan(&version); err != nil {
		return nil, fmt.Errorf("postgres at %s: %w", addr, err)
	}
	// Read back rather than assumed: a server found through the
	// environment or in a container runs as it was configured.
	settings, err := backends.ReadPostgresDurability(pctx, db.DB)
	if err != nil {
		return nil, fmt.Errorf("postgres at %s: %w", addr, err)
	}
	if durable && !settings.Full() {
		return nil, fmt.Errorf("postgres at %s (%s): -postgres-durable, but the server runs with %s; "+
			"-postgres-durable configures only a private server (unset -postgres-dsn and %s) or make that one durable",
			addr, source, settings, backends.EnvPostgresDSN)
	}
	srv := bench.Server{Backend: Name, Product: "PostgreSQL", Version: version, Addr: addr, Source: source, Settings: settings.String(), CPUFrom: bench.CPUNotReadable}
	if proc != nil {
		srv.CPU, srv.CPUFrom = bench.ProcessCPU(proc), bench.CPUFromProcess
	}
	return &bench.Opened{Conn: db, Servers: []bench.Server{srv}, Close: closeAll, Args: []string{"-postgres-dsn", dsn}}, nil
}

// reroute returns the URL dsn with its host and port replaced by addr, for
// a route (see bench.Route).
func reroute(dsn, addr string) (string, error) {
	u, err := url.Parse(dsn)
	if err != nil || u.Host == "" {
		return "", fmt.Errorf("postgres: -rtt needs a postgres:// URL with a host, not %q", dsn)
	}
	u.Host = addr
	return u.String(), nil
}
