package mysqltargets

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"strings"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/jmoiron/sqlx"

	"github.com/stockguard/stockguard/bench"
	"github.com/stockguard/stockguard/internal/backends"
)

// Backend is the MySQL backend: the server -mysql-dsn names, else the one
// package backends resolves (STOCKGUARD_MYSQL_DSN, else a private server
// started from the binaries on PATH and stopped at Close, else Docker in a
// binary that has it).
var Backend = bench.Backend{
	Name:  Name,
	About: "MySQL or MariaDB: -mysql-dsn, else STOCKGUARD_MYSQL_DSN, else a private server from mariadbd/mysqld on PATH",
	Flags: func(fs *flag.FlagSet) bench.Opener {
		dsn := fs.String("mysql-dsn", "", "MySQL DSN, e.g. root@tcp(127.0.0.1:3306)/test (default: resolved, see Backends)")
		durable := fs.Bool("durable", false, "durable MySQL: a private server flushes its redo and binary logs at every commit\n"+
			"(innodb_flush_log_at_trx_commit=1, log_bin, sync_binlog=1); any other server must already be so\n"+
			"(default: a private server runs with innodb_flush_log_at_trx_commit=2 and no binary log)")
		return bench.Opener{
			Check: func() error {
				if *dsn == "" {
					return nil
				}
				if _, err := mysql.ParseDSN(*dsn); err != nil {
					return fmt.Errorf("-mysql-dsn: %w", err)
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
// resolves when dsn is empty, with pools and round trip as oc says. With
// durable, a private server is started durable and any server must turn
// out to be.
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
	source := "-mysql-dsn"
	var proc *backends.Process
	if dsn == "" {
		rctx, cancel := context.WithTimeout(ctx, resolveTimeout)
		var opts []backends.MySQLOption
		if durable {
			opts = append(opts, backends.Durable())
		}
		m, err := backends.ResolveMySQLWith(rctx, opts...)
		cancel()
		if err != nil {
			return nil, err
		}
		closers = append(closers, m.Close)
		dsn, source, proc = m.DSN, string(m.Source), m.Proc
	}
	cfg, err := mysql.ParseDSN(dsn)
	if err != nil {
		return nil, fmt.Errorf("mysql: %w", err)
	}
	addr := cfg.Addr
	if oc.RTT != 0 {
		if cfg.Net != "tcp" {
			return nil, fmt.Errorf("mysql at %s: -rtt needs a TCP address, not %s", addr, cfg.Net)
		}
		via, end, err := bench.Route(addr, oc.RTT)
		if err != nil {
			return nil, err
		}
		closers = append(closers, end)
		cfg.Addr = via
	}
	// Client-side interpolation saves a prepare round trip per statement;
	// stockguard recommends it, so the benchmark measures with it unless
	// the DSN says otherwise.
	if !strings.Contains(dsn, "interpolateParams=") {
		cfg.InterpolateParams = true
	}
	// Several statements per round trip let mysql-batched send an order
	// batch in two (mysqllock.NewBatched's Take); recommended likewise.
	if !strings.Contains(dsn, "multiStatements=") {
		cfg.MultiStatements = true
	}
	db, err := sqlx.Open("mysql", cfg.FormatDSN())
	if err != nil {
		return nil, fmt.Errorf("mysql: %w", err)
	}
	closers = append(closers, db.Close)
	db.SetMaxOpenConns(oc.Pool)
	db.SetMaxIdleConns(oc.Pool)
	var version string
	pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := db.QueryRowContext(pctx, "SELECT VERSION()").Scan(&version); err != nil {
		return nil, fmt.Errorf("mysql at %s: %w", addr, err)
	}
	product := "MySQL"
	if v, _, ok := strings.Cut(version, "-MariaDB"); ok { // "10.11.6-MariaDB-0+deb12u1"
		product, version = "MariaDB", v
	}
	srv := bench.Server{Backend: Name, Product: product, Version: version, Addr: addr, Source: source, CPUFrom: bench.CPUNotReadable}
	if proc != nil {
		srv.CPU, srv.CPUFrom = bench.ProcessCPU(proc), bench.CPUFromProcess
	}
	if _, v, ok := strings.Cut(version, "-TiDB-"); ok { // "8.0.11-TiDB-v8.5.3": no InnoDB settings to read
		srv.Product, srv.Version = "TiDB", v
		if durable {
			return nil, fmt.Errorf("mysql at %s (%s): -durable configures MySQL or MariaDB, and this is TiDB", addr, source)
		}
		return &bench.Opened{Conn: db, Servers: []bench.Server{srv}, Close: closeAll, Args: []string{"-mysql-dsn", dsn}}, nil
	}
	// The settings are read back rather than assumed: a server found
	// through the environment or in a container runs as it was configured.
	settings, err := backends.ReadDurability(pctx, db.DB)
	if err != nil {
		return nil, fmt.Errorf("mysql at %s: %w", addr, err)
	}
	if durable && !settings.Full() {
		return nil, fmt.Errorf("mysql at %s (%s): -durable, but the server runs with %s; "+
			"-durable configures only a private server (unset -mysql-dsn and %s) or make that one durable",
			addr, source, settings, backends.EnvMySQLDSN)
	}
	srv.Settings = settings.String()
	return &bench.Opened{Conn: db, Servers: []bench.Server{srv}, Close: closeAll, Args: []string{"-mysql-dsn", dsn}}, nil
}
