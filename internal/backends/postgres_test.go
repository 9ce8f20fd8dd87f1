package backends

import (
	"context"
	"database/sql"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib"
)

// A private PostgreSQL starts, serves with the durability asked for, comes
// back with its data after a crash (Respawn), and leaves nothing behind.
func TestStartLocalPostgres_durableRespawnClose(t *testing.T) {
	skipShort(t)
	for _, durable := range []bool{false, true} {
		t.Run(map[bool]string{false: "fast", true: "durable"}[durable], func(t *testing.T) {
			var opts []PostgresOption
			if durable {
				opts = append(opts, DurablePostgres())
			}
			ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
			defer cancel()
			pg, err := StartLocalPostgres(ctx, opts...)
			if err != nil {
				unavailable(t, err)
			}
			t.Cleanup(func() { pg.Close() })
			db, err := sql.Open("pgx", pg.DSN)
			if err != nil {
				t.Fatal(err)
			}
			d, err := ReadPostgresDurability(ctx, db)
			if err != nil {
				t.Fatal(err)
			}
			if d.Full() != durable {
				t.Fatalf("durability %v, Full()=%v, want %v", d, d.Full(), durable)
			}
			// A durable server's crash recovery flushes the data directory
			// once per file system, not once per file (a minute and more on
			// a disk with slow flushes).
			var syncMethod string
			if err := db.QueryRowContext(ctx, "SHOW recovery_init_sync_method").Scan(&syncMethod); err != nil {
				t.Fatal(err)
			}
			if want := map[bool]string{false: "fsync", true: "syncfs"}[durable]; syncMethod != want {
				t.Errorf("recovery_init_sync_method %q, want %q", syncMethod, want)
			}
			for _, q := range []string{"CREATE TABLE kept (n int)", "INSERT INTO kept VALUES (7)", "CHECKPOINT"} {
				if _, err := db.ExecContext(ctx, q); err != nil {
					t.Fatal(err)
				}
			}
			db.Close()
			if err := pg.Kill(); err != nil {
				t.Fatal(err)
			}
			if err := pg.Respawn(ctx); err != nil {
				t.Fatal(err)
			}
			db, err = sql.Open("pgx", pg.DSN)
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			var n int
			if err := db.QueryRowContext(ctx, "SELECT n FROM kept").Scan(&n); err != nil || n != 7 {
				t.Fatalf("after respawn: %d, %v; want 7", n, err)
			}
			dir := pg.Proc.Dir
			pg.Close()
			if _, err := os.Stat(dir); !os.IsNotExist(err) {
				t.Fatalf("dir %s still there after Close: %v", dir, err)
			}
		})
	}
}

// STOCKGUARD_BACKEND=env without STOCKGUARD_POSTGRES_DSN is an error that
// says how to provide one, not a fallback to another way.
func TestResolvePostgres_envForcedWithoutDSN(t *testing.T) {
	t.Setenv(EnvBackend, string(SourceEnv))
	t.Setenv(EnvPostgresDSN, "")
	_, err := ResolvePostgres(t.Context())
	if err == nil {
		t.Fatal("resolved a server with no DSN under STOCKGUARD_BACKEND=env")
	}
	if want := EnvPostgresDSN + " is not set"; !contains(err.Error(), want) {
		t.Fatalf("error %q does not say %q", err, want)
	}
}

func contains(s, sub string) bool { return strings.Contains(s, sub) }

func TestProcStat(t *testing.T) {
	for _, c := range []struct {
		stat  string
		state string
		ppid  int
		ok    bool
	}{
		{"42 (postgres) T 7 42 42 0", "T", 7, true},
		{"42 (a (b) c) S 1 42", "S", 1, true},
		{"42 (postgres)", "", 0, false},
		{"42 (postgres) R x", "", 0, false},
	} {
		state, ppid, ok := procStat([]byte(c.stat))
		if state != c.state || ppid != c.ppid || ok != c.ok {
			t.Errorf("procStat(%q) = %q, %d, %v; want %q, %d, %v", c.stat, state, ppid, ok, c.state, c.ppid, c.ok)
		}
	}
}

// waitStopped returns once a process is stopped, and reports one that
// SIGSTOP never reached.
func TestWaitStopped(t *testing.T) {
	cmd := exec.Command("sleep", "30")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	pid := cmd.Process.Pid
	if err := waitStopped(pid, 50*time.Millisecond); err == nil {
		t.Fatal("a running process reported stopped")
	}
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	if err := waitStopped(pid, 5*time.Second); err != nil {
		t.Fatal(err)
	}
}
