package backends

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"

	"github.com/go-sql-driver/mysql"
)

// TiDB is found like MySQL, through its own settings; it is served as a
// *MySQL, since it speaks the same protocol.
const (
	EnvTiDBDSN   = "STOCKGUARD_TIDB_DSN"
	EnvTiDBImage = "STOCKGUARD_TIDB_IMAGE"
	// EnvBinDir names the directory scripts/build-tidb.sh puts tidb-server
	// in, when not the default (DefaultBinDir).
	EnvBinDir = "STOCKGUARD_BIN_DIR"
)

// DefaultBinDir returns where scripts/build-tidb.sh puts the binaries it
// builds unless STOCKGUARD_BIN_DIR says otherwise: stockguard/bin under the
// user's cache directory ($XDG_CACHE_HOME, else ~/.cache).
func DefaultBinDir() (string, error) {
	if d := os.Getenv(EnvBinDir); d != "" {
		return d, nil
	}
	cache, err := os.UserCacheDir()
	if err != nil {
		return "", err
	}
	return filepath.Join(cache, "stockguard", "bin"), nil
}

// tidbServerBinary finds tidb-server: on PATH, else where the build script
// links the version it pins.
func tidbServerBinary() (string, error) {
	if bin, err := exec.LookPath("tidb-server"); err == nil {
		return bin, nil
	}
	dir, err := DefaultBinDir()
	if err != nil {
		return "", fmt.Errorf("backends: no tidb-server on PATH, and no cache dir: %w", err)
	}
	bin := filepath.Join(dir, "tidb-server")
	if st, err := os.Stat(bin); err != nil || st.IsDir() || st.Mode()&0o111 == 0 {
		return "", fmt.Errorf("backends: no tidb-server on PATH nor at %s (build it with scripts/build-tidb.sh)", bin)
	}
	return bin, nil
}

// ResolveTiDB finds a TiDB server: STOCKGUARD_TIDB_DSN, else a private
// tidb-server from a local binary, else a container. The caller closes it.
func ResolveTiDB(ctx context.Context) (*MySQL, error) {
	return resolve(ctx, "tidb", EnvTiDBDSN, func(ctx context.Context, dsn string) (*MySQL, error) {
		if _, err := mysql.ParseDSN(dsn); err != nil {
			return nil, err
		}
		return &MySQL{DSN: dsn, Source: SourceEnv}, pingMySQL(ctx, dsn)
	}, StartLocalTiDB, func(ctx context.Context) (*MySQL, error) {
		dsn, stop, err := startDocker(ctx, func(s DockerStarters) starter { return s.TiDB })
		if err != nil {
			return nil, err
		}
		return &MySQL{DSN: dsn, Source: SourceDocker, close: stop}, nil
	})
}

// tidbConfig keeps every file the server writes inside its private dir:
// tmp-storage-path has no flag, and its default is under the system's temp
// dir, named after the ports.
const tidbConfig = "tmp-storage-path = %q\n"

// StartLocalTiDB starts a private tidb-server on free loopback ports with
// the unistore engine in volatile mode — one process, no PD or TiKV: TiDB's SQL
// layer, transactions and locks as clients meet them, not a multi-node
// cluster. Every setting is TiDB's default (autocommit statements run
// optimistically), so what a strategy does about the engine is its own.
func StartLocalTiDB(ctx context.Context) (*MySQL, error) {
	bin, err := tidbServerBinary()
	if err != nil {
		return nil, err
	}
	var lastErr error
	for range 3 { // another process may grab a free port before the server binds it
		dir, err := os.MkdirTemp("", "stockguard-tidb-")
		if err != nil {
			return nil, err
		}
		conf := filepath.Join(dir, "tidb.toml")
		if err := os.WriteFile(conf, fmt.Appendf(nil, tidbConfig, filepath.Join(dir, "tmp-storage")), 0o644); err != nil {
			os.RemoveAll(dir)
			return nil, err
		}
		port, err := freePort()
		if err != nil {
			os.RemoveAll(dir)
			return nil, err
		}
		status, err := freePort()
		if err != nil {
			os.RemoveAll(dir)
			return nil, err
		}
		// With -path "" unistore keeps its store in a fresh dir under
		// TMPDIR in volatile mode (no fsync, small tables): TMPDIR is the
		// private dir, so the store goes with it.
		p, err := start(dir, port, "env", "TMPDIR="+dir, bin, "-config", conf,
			"-store", "unistore", "-path", "",
			"-host", "127.0.0.1", "-P", strconv.Itoa(port),
			"-status-host", "127.0.0.1", "-status", strconv.Itoa(status),
			"-socket", filepath.Join(dir, "tidb.sock"), "-temp-dir", filepath.Join(dir, "tmp"),
			"-L", "error", "-log-file", filepath.Join(dir, "tidb.log"),
			"-log-slow-query", filepath.Join(dir, "slow.log"))
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
