package backends

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"

	"github.com/redis/go-redis/v9"
	"sync/atomic"
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
	Main(m)
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
	rs := PrivateRedis(t, 1)
	r := rs[0]
	ctx := t.Context()
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

func TestSharedMySQL_ping(t *testing.T) {
	m := SharedMySQL(t)
	start := time.Now()
	if err := pingMySQL(context.Background(), m.DSN); err != nil {
		t.Fatal(err)
	}
	t.Logf("mysql %s via %s, ping %v", m.DSN, m.Source, time.Since(start))
}

func TestPrivateCluster_routesKeysAcrossMasters(t *testing.T) {
	c := PrivateCluster(t, 3)
	cl := c.Client()
	defer cl.Close()
	ctx := t.Context()
	for i := range 30 {
		if err := cl.Set(ctx, "k"+string(rune('a'+i)), i, 0).Err(); err != nil {
			t.Fatal(err)
		}
	}
	var masters atomic.Int32 // ForEachMaster calls back concurrently
	err := cl.ForEachMaster(ctx, func(ctx context.Context, m *redis.Client) error {
		n, err := m.DBSize(ctx).Result()
		if n > 0 {
			masters.Add(1)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if masters.Load() != 3 {
		t.Fatalf("keys landed on %d of 3 masters", masters.Load())
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
