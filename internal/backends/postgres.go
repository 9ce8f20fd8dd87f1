package backends

import (
	"bytes"
	"context"
	"database/sql"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
	_ "github.com/jackc/pgx/v5/stdlib" // the "pgx" database/sql driver, for ReadPostgresDurability's callers and the ping
)

// PostgreSQL is found through its own settings.
const (
	EnvPostgresDSN   = "STOCKGUARD_POSTGRES_DSN"
	EnvPostgresImage = "STOCKGUARD_POSTGRES_IMAGE"
)

// Postgres is a reachable PostgreSQL server with a database to use.
type Postgres struct {
	DSN    string   // a pgx connection URL naming the database
	Source Source   // how it was found
	Proc   *Process // the server process when Source is SourceLocal, else nil

	close func() error
}

// Close stops the server if this package started it.
func (p *Postgres) Close() error {
	if p.close == nil {
		return nil
	}
	return p.close()
}

// Respawn brings a killed or stopped local server back on the same port
// with its data dir, as after a crash: PostgreSQL replays its WAL.
func (p *Postgres) Respawn(ctx context.Context) error {
	if p.Proc == nil {
		return fmt.Errorf("backends: postgres %s was not started here (%s)", p.DSN, p.Source)
	}
	return p.Proc.Respawn(ctx, func(ctx context.Context) error { return pingPostgres(ctx, p.DSN) })
}

// Kill crashes a local server as a machine crash would: the postmaster and
// every process it forked (backends, checkpointer, WAL writer) at once.
// Killing the postmaster alone would leave its children serving open
// connections until they notice, and holding its shared memory.
func (p *Postgres) Kill() error {
	if p.Proc == nil {
		return fmt.Errorf("backends: postgres %s was not started here (%s)", p.DSN, p.Source)
	}
	pid := p.Proc.Pid()
	// Stopped, the postmaster cannot fork replacements while its children die.
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		return err
	}
	// kill(2) returns before the signal takes effect on a process running
	// on another core: a child forked in between would be missed by the
	// listing and survive its postmaster, holding the port and the shared
	// memory that the restart needs.
	if err := waitStopped(pid, time.Second); err != nil {
		return err
	}
	for _, child := range childrenOf(pid) {
		syscall.Kill(child, syscall.SIGKILL)
	}
	return syscall.Kill(pid, syscall.SIGKILL)
}

// waitStopped waits until process pid is stopped by a signal, as /proc
// tells, for up to limit.
func waitStopped(pid int, limit time.Duration) error {
	for deadline := time.Now().Add(limit); ; time.Sleep(time.Millisecond) {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			return err
		}
		if state, _, ok := procStat(b); ok && state == "T" {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("backends: process %d not stopped %v after SIGSTOP", pid, limit)
		}
	}
}

// procStat reads the state and the parent's pid from the contents of a
// /proc/<pid>/stat file: "pid (comm) state ppid …", where comm may hold
// spaces and parentheses.
func procStat(b []byte) (state string, ppid int, ok bool) {
	f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+1:]))
	if len(f) < 2 {
		return "", 0, false
	}
	ppid, err := strconv.Atoi(f[1])
	if err != nil {
		return "", 0, false
	}
	return f[0], ppid, true
}

// childrenOf lists the processes whose parent is pid, from /proc.
func childrenOf(pid int) []int {
	stats, _ := filepath.Glob("/proc/[0-9]*/stat")
	var kids []int
	for _, path := range stats {
		b, err := os.ReadFile(path)
		if err != nil {
			continue
		}
		if _, ppid, ok := procStat(b); ok && ppid == pid {
			child, _ := strconv.Atoi(filepath.Base(filepath.Dir(path)))
			kids = append(kids, child)
		}
	}
	return kids
}

// fastShutdown stops a local server the way pg_ctl's default (fast) mode
// does, SIGINT: clients are disconnected, then it exits. The reaper's
// SIGTERM is PostgreSQL's smart shutdown, which waits for every client to
// leave — for the reaper's 15 s, with pools open — before its SIGKILL.
func fastShutdown(p *Process) error {
	if p.Signal(syscall.SIGINT) == nil {
		for deadline := time.Now().Add(10 * time.Second); p.Alive() && time.Now().Before(deadline); {
			time.Sleep(20 * time.Millisecond)
		}
	}
	return p.Close()
}

// pingPostgres connects to dsn and runs a query: a server still starting
// up or recovering refuses connections (57P03), which keeps this failing
// until it can serve.
func pingPostgres(ctx context.Context, dsn string) error {
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	cfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		return err
	}
	cfg.ConnectTimeout = 2 * time.Second
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	var one int
	return conn.QueryRow(ctx, "SELECT 1").Scan(&one)
}

// ResolvePostgres finds a PostgreSQL server: STOCKGUARD_POSTGRES_DSN, else a
// private server from local binaries, else a container. The caller closes it.
func ResolvePostgres(ctx context.Context) (*Postgres, error) { return ResolvePostgresWith(ctx) }

// ResolvePostgresWith is ResolvePostgres starting a private server with opts.
func ResolvePostgresWith(ctx context.Context, opts ...PostgresOption) (*Postgres, error) {
	return resolve(ctx, "postgres", EnvPostgresDSN, func(ctx context.Context, dsn string) (*Postgres, error) {
		if _, err := pgx.ParseConfig(dsn); err != nil {
			return nil, err
		}
		return &Postgres{DSN: dsn, Source: SourceEnv}, pingPostgres(ctx, dsn)
	}, func(ctx context.Context) (*Postgres, error) { return StartLocalPostgres(ctx, opts...) }, func(ctx context.Context) (*Postgres, error) {
		dsn, stop, err := startDocker(ctx, func(s DockerStarters) starter { return s.Postgres })
		if err != nil {
			return nil, err
		}
		return &Postgres{DSN: dsn, Source: SourceDocker, close: stop}, nil
	})
}

// PostgresOption configures a private server StartLocalPostgres starts.
type PostgresOption func(*postgresOptions)

type postgresOptions struct{ durable bool }

// DurablePostgres makes a private server durable: fsync=on,
// synchronous_commit=on, full_page_writes=on — every commit waits for its
// WAL record to reach the disk, as a production primary runs. Default: not
// durable (fsync=off, synchronous_commit=off, full_page_writes=off), for
// the reason StartLocalMySQL gives. It has no effect on a server found
// through STOCKGUARD_POSTGRES_DSN or started in a container: callers that
// need durability read the settings back (ReadPostgresDurability).
func DurablePostgres() PostgresOption { return func(o *postgresOptions) { o.durable = true } }

func (o postgresOptions) durabilityArgs() []string {
	if !o.durable {
		return []string{"-c", "fsync=off", "-c", "synchronous_commit=off", "-c", "full_page_writes=off"}
	}
	// Crash recovery first flushes the data directory: by default one
	// open and fsync per file, which on a disk whose flushes are slow
	// kept a server with a thousand files recovering past the minute
	// Respawn waits. syncfs flushes each file system once, and with it
	// whatever else on it is dirty (3 GB written elsewhere just before
	// made a respawn take 2.7 s here).
	return []string{"-c", "fsync=on", "-c", "synchronous_commit=on", "-c", "full_page_writes=on",
		"-c", "recovery_init_sync_method=syncfs"}
}

// PostgresDurability is how a PostgreSQL server makes commits durable, as
// it reports its own settings.
type PostgresDurability struct {
	Fsync             bool   // fsync: WAL writes are flushed to disk
	SynchronousCommit string // synchronous_commit: "on" waits for the flush at COMMIT
}

// Full reports whether a committed transaction survives a crash of the
// machine.
func (d PostgresDurability) Full() bool {
	return d.Fsync && d.SynchronousCommit != "off"
}

// String reads "fsync=on synchronous_commit=on".
func (d PostgresDurability) String() string {
	f := "off"
	if d.Fsync {
		f = "on"
	}
	return "fsync=" + f + " synchronous_commit=" + d.SynchronousCommit
}

// ReadPostgresDurability asks the server behind db for its durability
// settings.
func ReadPostgresDurability(ctx context.Context, db *sql.DB) (PostgresDurability, error) {
	var d PostgresDurability
	var fsync string
	err := db.QueryRowContext(ctx, "SELECT current_setting('fsync'), current_setting('synchronous_commit')").Scan(&fsync, &d.SynchronousCommit)
	if err != nil {
		return PostgresDurability{}, fmt.Errorf("backends: reading the durability settings: %w", err)
	}
	d.Fsync = fsync == "on"
	return d, nil
}

// postgresBinDir finds the directory of initdb and postgres: initdb on
// PATH (its symlinks resolved, since Debian links only some of the tools
// into /usr/bin), else the newest /usr/lib/postgresql/*/bin, where Debian
// and Ubuntu install the server without putting it on PATH.
func postgresBinDir() (string, error) {
	var dirs []string
	if bin, err := exec.LookPath("initdb"); err == nil {
		if real, err := filepath.EvalSymlinks(bin); err == nil {
			dirs = append(dirs, filepath.Dir(real))
		}
	}
	found, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	slices.SortFunc(found, func(a, b string) int { return versionOf(b) - versionOf(a) })
	dirs = append(dirs, found...)
	for _, d := range dirs {
		if isExec(filepath.Join(d, "initdb")) && isExec(filepath.Join(d, "postgres")) {
			return d, nil
		}
	}
	return "", fmt.Errorf("backends: no initdb + postgres on PATH nor in /usr/lib/postgresql/*/bin")
}

// versionOf is the major version in /usr/lib/postgresql/<v>/bin, else 0.
func versionOf(dir string) int {
	v, _ := strconv.Atoi(filepath.Base(filepath.Dir(dir)))
	return v
}

func isExec(path string) bool {
	st, err := os.Stat(path)
	return err == nil && !st.IsDir() && st.Mode()&0o111 != 0
}

// postgresUser returns how to run the server's binaries: as this user, or,
// for root — whom initdb and postgres refuse — as the unprivileged user
// "postgres" (else "nobody") through setpriv, with the uid and gid that
// must own its dir.
func postgresUser() (prefix []string, uid, gid int, err error) {
	if os.Geteuid() != 0 {
		return nil, -1, -1, nil
	}
	setpriv, err := exec.LookPath("setpriv")
	if err != nil {
		return nil, 0, 0, fmt.Errorf("backends: postgres refuses to run as root, and setpriv is not on PATH to drop privileges: %w", err)
	}
	for _, name := range []string{"postgres", "nobody"} {
		u, err := user.Lookup(name)
		if err != nil {
			continue
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		return []string{setpriv, "--reuid=" + u.Uid, "--regid=" + u.Gid, "--clear-groups"}, uid, gid, nil
	}
	return nil, 0, 0, fmt.Errorf("backends: postgres refuses to run as root, and there is no user postgres or nobody to run it as")
}

// StartLocalPostgres initialises a cluster in a temp dir and starts a
// private postgres on a free loopback port (user postgres, trust
// authentication, database postgres), in the foreground under the reaper
// (see Process), so that it is stopped and its dir removed however the
// test binary ends. By default it trades durability for speed;
// DurablePostgres() makes every commit wait for the disk.
func StartLocalPostgres(ctx context.Context, opts ...PostgresOption) (*Postgres, error) {
	var o postgresOptions
	for _, opt := range opts {
		opt(&o)
	}
	bin, err := postgresBinDir()
	if err != nil {
		return nil, err
	}
	prefix, uid, gid, err := postgresUser()
	if err != nil {
		return nil, err
	}
	var lastErr error
	for range 3 { // another process may grab the free port before the server binds it
		dir, err := os.MkdirTemp("", "stockguard-postgres-")
		if err != nil {
			return nil, err
		}
		if uid >= 0 {
			if err := os.Chown(dir, uid, gid); err != nil {
				os.RemoveAll(dir)
				return nil, err
			}
		}
		datadir := filepath.Join(dir, "data")
		initArgs := append(slices.Clone(prefix), filepath.Join(bin, "initdb"), "-D", datadir,
			"-U", "postgres", "-A", "trust", "-E", "UTF8", "--locale=C", "--no-sync")
		out, err := exec.CommandContext(ctx, initArgs[0], initArgs[1:]...).CombinedOutput()
		if err != nil {
			os.RemoveAll(dir)
			lastErr = fmt.Errorf("backends: initdb: %v\n%s", err, out)
			continue
		}
		port, err := freePort()
		if err != nil {
			os.RemoveAll(dir)
			return nil, err
		}
		args := append(append(slices.Clone(prefix), filepath.Join(bin, "postgres"), "-D", datadir,
			"-p", strconv.Itoa(port), "-k", dir,
			"-c", "listen_addresses=127.0.0.1", "-c", "max_connections=600",
			"-c", "shared_buffers=128MB", "-c", "logging_collector=off",
			"-c", "dynamic_shared_memory_type=mmap", "-c", "max_locks_per_transaction=256"),
			o.durabilityArgs()...)
		p, err := start(dir, port, args...)
		if err != nil {
			os.RemoveAll(dir)
			return nil, err
		}
		dsn := (&url.URL{Scheme: "postgres", User: url.User("postgres"),
			Host: net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), Path: "/postgres",
			RawQuery: "sslmode=disable"}).String()
		pg := &Postgres{DSN: dsn, Source: SourceLocal, Proc: p, close: func() error { return fastShutdown(p) }}
		wctx, cancel := context.WithTimeout(ctx, 60*time.Second)
		err = p.waitReady(wctx, func(ctx context.Context) error { return pingPostgres(ctx, dsn) })
		cancel()
		if err == nil {
			return pg, nil
		}
		p.Close()
		lastErr = err
	}
	return nil, lastErr
}
