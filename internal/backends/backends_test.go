package backends

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"

	"syscall"
	"testing"
	"time"
)

// panicChild, set in the environment, makes the test binary a child that
// starts a server and panics (see TestReaper_stopsServerWhenBinaryPanics).
const panicChild = "STOCKGUARD_TEST_PANIC_CHILD"

func TestMain(m *testing.M) {
	if os.Getenv(panicChild) == "1" {
		r, err := StartLocalRedis(context.Background())
		if err != nil {
			fmt.Println("ERR", err)
			os.Exit(3)
		}
		fmt.Println("SERVER", r.Proc.Pid(), r.Proc.Dir)
		panic("test binary dies without stopping its server")
	}
	os.Exit(m.Run())
}

// skipShort skips a test that starts servers under go test -short. (The
// tests here cannot use package backendstest, which imports this one.)
func skipShort(t *testing.T) {
	t.Helper()
	if testing.Short() {
		t.Skip("needs a server; skipped under -short")
	}
}

// unavailable skips t, or fails it when Required.
func unavailable(t *testing.T, err error) {
	t.Helper()
	if Required() {
		t.Fatalf("%v\n(%s is set: a missing backend is a failure)", err, EnvRequire)
	}
	t.Skipf("%v\n(set %s=1 to make this a failure)", err, EnvRequire)
}

// TestReaper_stopsServerWhenBinaryPanics runs a child test binary that
// starts a server and panics, skipping every deferred Close and cleanup:
// the reaper must still stop the server and remove its temp dir.
func TestReaper_stopsServerWhenBinaryPanics(t *testing.T) {
	skipShort(t)
	cmd := exec.CommandContext(t.Context(), os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), panicChild+"=1")
	out, err := cmd.Output()
	var pid int
	var dir string
	if _, serr := fmt.Sscanf(string(out), "SERVER %d %s", &pid, &dir); serr != nil {
		unavailable(t, fmt.Errorf("child did not start a server (%v): %s", err, out))
	}
	if err == nil {
		t.Fatalf("child exited cleanly, want a panic: %s", out)
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		_, statErr := os.Stat(dir)
		gone := syscall.Kill(pid, 0) != nil && os.IsNotExist(statErr)
		if gone {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("20s after the child died: server pid %d alive=%v, dir %s exists=%v", pid, syscall.Kill(pid, 0) == nil, dir, statErr == nil)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func TestStartLocalRedis_killRestartClose(t *testing.T) {
	skipShort(t)
	ctx := t.Context()
	r, err := StartLocalRedis(ctx)
	if err != nil {
		unavailable(t, err)
	}
	t.Cleanup(func() { r.Close() })
	if err := r.ping(ctx); err != nil {
		t.Fatal(err)
	}
	if err := r.Proc.Kill(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(100 * time.Millisecond)
	if err := r.ping(ctx); err == nil {
		t.Fatal("ping answered after SIGKILL")
	}
	if err := r.Restart(ctx); err != nil {
		t.Fatal(err)
	}
	if err := r.ping(ctx); err != nil {
		t.Fatalf("after restart: %v", err)
	}
	dir, pid := r.Proc.Dir, r.Proc.Pid()
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("temp dir %s left behind: %v", dir, err)
	}
	if err := syscall.Kill(pid, 0); err == nil {
		t.Errorf("server pid %d still running after Close", pid)
	}
}

// TestWaitReady_portHeldByAnotherServer gives a server's Process the port of
// another one, as when both were handed the same free port and the other
// bound it first: its readiness must fail although the port answers, not
// count the other's answer as its own server's (a Restart then "succeeded"
// against the other server and its data).
func TestWaitReady_portHeldByAnotherServer(t *testing.T) {
	skipShort(t)
	ctx := t.Context()
	var rs [2]*Redis
	for i := range rs {
		r, err := StartLocalRedis(ctx)
		if err != nil {
			unavailable(t, err)
		}
		t.Cleanup(func() { r.Close() })
		rs[i] = r
	}
	if err := rs[0].Proc.holdsPort(); err != nil {
		t.Fatalf("the server on its own port: %v", err)
	}
	loser := &Process{Dir: rs[1].Proc.Dir, Args: rs[1].Proc.Args, Port: rs[0].Proc.Port, pid: rs[1].Proc.Pid()}
	if err := loser.holdsPort(); err == nil || !strings.Contains(err.Error(), "another server does") {
		t.Fatalf("a server on another's port: %v, want an error saying so", err)
	}
	wctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	if err := loser.waitReady(wctx, rs[0].ping); err == nil {
		t.Fatal("ready on a port another server holds, answered by that server")
	}
}

// TestFreePort_neverTwice takes 300 ports: the kernel hands just-freed
// ports out again, and without handedOut 300 calls of freePort saw a
// repeat in each of 200 runs.
func TestFreePort_neverTwice(t *testing.T) {
	seen := map[int]bool{}
	for range 300 {
		p, err := freePort()
		if err != nil {
			t.Fatal(err)
		}
		if seen[p] {
			t.Fatalf("freePort returned %d twice", p)
		}
		seen[p] = true
	}
}

func TestResolve_unavailableNamesTheThreeWays(t *testing.T) {
	t.Setenv(EnvBackend, string(SourceEnv))
	t.Setenv(EnvMySQLDSN, "")
	t.Setenv(EnvRedisAddr, "")
	_, merr := ResolveMySQL(t.Context())
	_, rerr := ResolveRedis(t.Context())
	for _, err := range []error{merr, rerr} {
		if !errors.Is(err, ErrUnavailable) {
			t.Fatalf("got %v, want ErrUnavailable", err)
		}
		for _, way := range []string{EnvMySQLDSN, EnvRedisAddr, "mariadbd", "redis-server", "docker", EnvBackend} {
			if !strings.Contains(err.Error(), way) {
				t.Errorf("message does not mention %q:\n%v", way, err)
			}
		}
	}
}

func TestResolve_badBackendSetting(t *testing.T) {
	t.Setenv(EnvBackend, "kubernetes")
	if _, err := ResolveRedis(t.Context()); err == nil || !strings.Contains(err.Error(), "env, local or docker") {
		t.Fatalf("got %v", err)
	}
}

// TestStartLocalMySQL_durable starts a default and a durable private server
// side by side and reads each one's settings back from the server itself.
func TestStartLocalMySQL_durable(t *testing.T) {
	skipShort(t)
	for _, tc := range []struct {
		name string
		opts []MySQLOption
		want Durability
	}{
		{"default", nil, Durability{FlushLogAtTrxCommit: 2, SyncBinlog: 0, LogBin: false}},
		{"durable", []MySQLOption{Durable()}, Durability{FlushLogAtTrxCommit: 1, SyncBinlog: 1, LogBin: true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			m, err := StartLocalMySQL(t.Context(), tc.opts...)
			if err != nil {
				unavailable(t, err)
			}
			t.Cleanup(func() { m.Close() })
			db, err := sql.Open("mysql", m.DSN)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { db.Close() })
			got, err := ReadDurability(t.Context(), db)
			if err != nil {
				t.Fatal(err)
			}
			if got != tc.want || got.Full() != (tc.name == "durable") {
				t.Errorf("settings %v (full %v), want %v", got, got.Full(), tc.want)
			}
		})
	}
}
