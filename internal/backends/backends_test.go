package backends

import (
	"context"
	"errors"
	"os"
	"strings"

	"github.com/redis/go-redis/v9"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

func TestMain(m *testing.M) { Main(m) }

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
