package dockerbackend_test

import (
	"context"
	"database/sql"
	"os"
	"testing"
	"time"

	_ "github.com/go-sql-driver/mysql"

	"github.com/stockguard/stockguard/internal/backends"
	"github.com/stockguard/stockguard/internal/backends/backendstest"
	"github.com/stockguard/stockguard/internal/backends/dockerbackend"
)

// TestDocker_startPingClose runs only with STOCKGUARD_BACKEND=docker: the
// Docker path is opt-in (resolution reaches it only when no local binaries
// exist), and CI has no Docker engine.
func TestDocker_startPingClose(t *testing.T) {
	backendstest.SkipShort(t)
	if os.Getenv(backends.EnvBackend) != string(backends.SourceDocker) {
		t.Skipf("opt-in Docker path, not a missing backend: set %s=docker to run it", backends.EnvBackend)
	}
	ctx := t.Context()

	start := time.Now()
	m, err := backends.ResolveMySQL(ctx)
	if err != nil {
		backendstest.Unavailable(t, err)
	}
	t.Cleanup(func() { m.Close() })
	t.Logf("mysql %s: started in %v", m.DSN, time.Since(start).Round(time.Millisecond))
	if m.Source != backends.SourceDocker {
		t.Errorf("Source = %q, want %q", m.Source, backends.SourceDocker)
	}
	if err := pingMySQL(ctx, m.DSN); err != nil {
		t.Fatal(err)
	}

	start = time.Now()
	r, err := backends.ResolveRedis(ctx)
	if err != nil {
		backendstest.Unavailable(t, err)
	}
	t.Cleanup(func() { r.Close() })
	t.Logf("redis %s: started in %v", r.Addr, time.Since(start).Round(time.Millisecond))
	if err := pingRedis(ctx, r); err != nil {
		t.Fatal(err)
	}

	start = time.Now()
	if err := m.Close(); err != nil {
		t.Errorf("mysql Close: %v", err)
	}
	if err := r.Close(); err != nil {
		t.Errorf("redis Close: %v", err)
	}
	t.Logf("both closed in %v", time.Since(start).Round(time.Millisecond))
	if err := pingMySQL(ctx, m.DSN); err == nil {
		t.Error("mysql answers after Close")
	}
	if err := pingRedis(ctx, r); err == nil {
		t.Error("redis answers after Close")
	}
	if err := m.Close(); err != nil {
		t.Errorf("second mysql Close: %v", err)
	}
}

func pingMySQL(ctx context.Context, dsn string) error {
	db, err := sql.Open("mysql", dsn)
	if err != nil {
		return err
	}
	defer db.Close()
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	return db.PingContext(ctx)
}

func pingRedis(ctx context.Context, r *backends.Redis) error {
	c := r.Client()
	defer c.Close()
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	return c.Ping(ctx).Err()
}

// TestDocker_unavailableEngineFailsFast needs no Docker: an engine that does
// not answer must give an error promptly, without a panic and without
// trying another engine or a registry.
func TestDocker_unavailableEngineFailsFast(t *testing.T) {
	t.Setenv("DOCKER_HOST", "unix://"+t.TempDir()+"/no-docker.sock")
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	start := time.Now()
	addr, stop, err := dockerbackend.StartRedis(ctx)
	if err == nil {
		stop()
		t.Fatalf("started a container at %s through a DOCKER_HOST that does not exist", addr)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("took %v to report %v", d, err)
	}
	t.Logf("%v", err)
}
