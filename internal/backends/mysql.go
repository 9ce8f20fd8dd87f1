package backends

import (
	"context"
	"database/sql"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"time"

	"github.com/go-sql-driver/mysql"
)

// MySQL is a reachable MySQL or MariaDB server with a database to use.
type MySQL struct {
	DSN    string   // go-sql-driver/mysql DSN naming the database
	Source Source   // how it was found
	Proc   *Process // the server process when Source is SourceLocal, else nil

	close func() error
}

// Close stops the server if this package started it.
func (m *MySQL) Close() error {
	if m.close == nil {
		return nil
	}
	return m.close()
}

// Config returns the parsed DSN, for callers that add driver settings.
func (m *MySQL) Config() *mysql.Config {
	cfg, err := mysql.ParseDSN(m.DSN)
	if err != nil {
		panic(fmt.Sprintf("backends: invalid DSN %q: %v", m.DSN, err)) // validated when resolved
	}
	return cfg
}

// ping connects and makes sure the database exists.
func pingMySQL(ctx context.Context, dsn string) error {
	cfg, err := mysql.ParseDSN(dsn)
	if err != nil {
		return err
	}
	dbName := cfg.DBName
	cfg.DBName = ""
	cfg.Timeout = 2 * time.Second
	db, err := sql.Open("mysql", cfg.FormatDSN())
	if err != nil {
		return err
	}
	defer db.Close()
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	if err := db.PingContext(ctx); err != nil {
		return err
	}
	if dbName != "" {
		_, err = db.ExecContext(ctx, "CREATE DATABASE IF NOT EXISTS `"+dbName+"`")
	}
	return err
}

// mysqlServerBinaries finds a server and how to initialise its data dir:
// MariaDB's mariadb-install-db, or MySQL's mysqld --initialize-insecure.
//
// The bootstrap gets its own tmpdir: with the shared /tmp, two test binaries
// initialising at once collide on the bootstrap's temporary table files.
func mysqlServerBinaries() (server string, initArgs func(datadir, tmpdir string) []string, err error) {
	if bin, err := exec.LookPath("mariadbd"); err == nil {
		if inst, err := exec.LookPath("mariadb-install-db"); err == nil {
			return bin, func(datadir, tmpdir string) []string {
				return []string{inst, "--no-defaults", "--datadir=" + datadir, "--tmpdir=" + tmpdir, "--user=" + currentUser(),
					"--auth-root-authentication-method=normal", "--skip-test-db", "--skip-name-resolve"}
			}, nil
		}
	}
	if bin, err := exec.LookPath("mysqld"); err == nil {
		return bin, func(datadir, tmpdir string) []string {
			return []string{bin, "--no-defaults", "--initialize-insecure", "--datadir=" + datadir, "--tmpdir=" + tmpdir, "--user=" + currentUser()}
		}, nil
	}
	return "", nil, fmt.Errorf("backends: neither mariadbd + mariadb-install-db nor mysqld on PATH")
}

func currentUser() string {
	if os.Geteuid() == 0 {
		return "root" // mysqld refuses to run as root unless told to
	}
	if u := os.Getenv("USER"); u != "" {
		return u
	}
	return strconv.Itoa(os.Geteuid())
}

// MySQLOption configures a private server StartLocalMySQL starts.
type MySQLOption func(*mysqlOptions)

type mysqlOptions struct{ durable bool }

// Durable makes a private server durable: InnoDB flushes its log at every
// commit (innodb_flush_log_at_trx_commit=1) and the binary log is on and
// synced at every commit (sync_binlog=1), as a production primary runs.
// Default: not durable (innodb_flush_log_at_trx_commit=2, no binary log).
// It has no effect on a server found through STOCKGUARD_MYSQL_DSN or
// started in a container: callers that need durability read the settings
// back from the server.
func Durable() MySQLOption { return func(o *mysqlOptions) { o.durable = true } }

// durabilityArgs are the server options opts asks for.
func (o mysqlOptions) durabilityArgs(dir string) []string {
	if o.durable {
		// A binary log needs a server id; its files live in the private dir.
		return []string{"--innodb-flush-log-at-trx-commit=1",
			"--log-bin=" + filepath.Join(dir, "binlog"), "--sync-binlog=1", "--server-id=1"}
	}
	return []string{"--innodb-flush-log-at-trx-commit=2", "--skip-log-bin"}
}

// StartLocalMySQL initialises a data dir in a temp dir and starts a private
// mariadbd (or mysqld) on a free loopback port. By default the server trades
// durability for speed (innodb_flush_log_at_trx_commit=2, no binary log):
// it is a test server, and fsync latency of a shared disk would drown what
// the strategies differ in. Durable() makes it flush at every commit.
func StartLocalMySQL(ctx context.Context, opts ...MySQLOption) (*MySQL, error) {
	var o mysqlOptions
	for _, opt := range opts {
		opt(&o)
	}
	server, initArgs, err := mysqlServerBinaries()
	if err != nil {
		return nil, err
	}
	var lastErr error
	// Three tries: another process may grab the free port before the server
	// binds it, and a bootstrap can fail for reasons of the moment.
	for range 3 {
		dir, err := os.MkdirTemp("", "stockguard-mysql-")
		if err != nil {
			return nil, err
		}
		datadir, tmpdir := filepath.Join(dir, "data"), filepath.Join(dir, "tmp")
		if err := os.Mkdir(tmpdir, 0o755); err != nil {
			os.RemoveAll(dir)
			return nil, err
		}
		ia := initArgs(datadir, tmpdir)
		out, err := exec.CommandContext(ctx, ia[0], ia[1:]...).CombinedOutput()
		if err != nil {
			os.RemoveAll(dir)
			lastErr = fmt.Errorf("backends: %s: %v\n%s", filepath.Base(ia[0]), err, out)
			continue
		}
		port, err := freePort()
		if err != nil {
			os.RemoveAll(dir)
			return nil, err
		}
		args := append([]string{server, "--no-defaults",
			"--datadir=" + datadir, "--user=" + currentUser(),
			"--port=" + strconv.Itoa(port), "--bind-address=127.0.0.1",
			"--socket=" + filepath.Join(dir, "mysqld.sock"), "--tmpdir=" + tmpdir,
			"--pid-file=" + filepath.Join(dir, "mysqld.pid"),
			"--skip-name-resolve", "--max-connections=1000",
			"--innodb-buffer-pool-size=256M", "--performance-schema=OFF",
		}, o.durabilityArgs(dir)...)
		p, err := start(dir, port, args...)
		if err != nil {
			os.RemoveAll(dir)
			return nil, err
		}
		m, err := readyMySQL(ctx, p, port)
		if err == nil {
			return m, nil
		}
		lastErr = err
	}
	return nil, lastErr
}

// readyMySQL waits until the server of the MySQL protocol that p started
// on port answers, as root on database test, and returns it; when it does
// not within a minute, p is closed.
func readyMySQL(ctx context.Context, p *Process, port int) (*MySQL, error) {
	cfg := mysql.NewConfig()
	cfg.User, cfg.Net, cfg.Addr, cfg.DBName = "root", "tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), "test"
	m := &MySQL{DSN: cfg.FormatDSN(), Source: SourceLocal, Proc: p, close: p.Close}
	wctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	if err := p.waitReady(wctx, func(ctx context.Context) error { return pingMySQL(ctx, m.DSN) }); err != nil {
		p.Close()
		return nil, err
	}
	return m, nil
}
