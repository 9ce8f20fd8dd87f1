package backends

import (
	"context"
	"os"
	"testing"
	"time"
)

// TestDocker_startPingClose runs only with STOCKGUARD_BACKEND=docker: the
// Docker path is opt-in (resolution reaches it only when no local binaries
// exist), and CI has no Docker engine.
func TestDocker_startPingClose(t *testing.T) {
	skipShort(t)
	if os.Getenv(EnvBackend) != string(SourceDocker) {
		t.Skipf("opt-in Docker path, not a missing backend: set %s=docker to run it", EnvBackend)
	}
	ctx := t.Context()

	start := time.Now()
	m, err := startDockerMySQL(ctx)
	if err != nil {
		unavailable(t, err)
	}
	t.Cleanup(func() { m.Close() })
	t.Logf("mysql %s (%s): started in %v", imageFromEnv(EnvMySQLImage, defaultMySQLImage), m.DSN, time.Since(start).Round(time.Millisecond))
	if m.Source != SourceDocker {
		t.Errorf("Source = %q, want %q", m.Source, SourceDocker)
	}
	if err := pingMySQL(ctx, m.DSN); err != nil {
		t.Fatal(err)
	}

	start = time.Now()
	r, err := startDockerRedis(ctx)
	if err != nil {
		unavailable(t, err)
	}
	t.Cleanup(func() { r.Close() })
	t.Logf("redis %s (%s): started in %v", imageFromEnv(EnvRedisImage, defaultRedisImage), r.Addr, time.Since(start).Round(time.Millisecond))
	if err := r.ping(ctx); err != nil {
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
	if err := r.ping(ctx); err == nil {
		t.Error("redis answers after Close")
	}
	if err := m.Close(); err != nil {
		t.Errorf("second mysql Close: %v", err)
	}
}

// TestDocker_unavailableEngineFailsFast needs no Docker: an engine that does
// not answer must give an error promptly, without a panic and without
// trying another engine or a registry.
func TestDocker_unavailableEngineFailsFast(t *testing.T) {
	t.Setenv("DOCKER_HOST", "unix://"+t.TempDir()+"/no-docker.sock")
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	start := time.Now()
	r, err := startDockerRedis(ctx)
	if err == nil {
		r.Close()
		t.Fatalf("started a container at %s through a DOCKER_HOST that does not exist", r.Addr)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("took %v to report %v", d, err)
	}
	t.Logf("%v", err)
}
