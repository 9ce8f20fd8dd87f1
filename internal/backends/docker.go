package backends

import (
	"context"
	"errors"
	"sync"
)

// DockerStarters start the containers of the docker way. Each returns the
// server's DSN or address and how to remove its container.
type DockerStarters struct {
	MySQL  func(ctx context.Context) (dsn string, stop func() error, err error)
	Redis  func(ctx context.Context) (addr string, stop func() error, err error)
	TiDB   func(ctx context.Context) (dsn string, stop func() error, err error)
	Valkey func(ctx context.Context) (addr string, stop func() error, err error)
	// Postgres returns a pgx connection URL.
	Postgres func(ctx context.Context) (dsn string, stop func() error, err error)
}

var (
	dockerMu sync.Mutex
	docker   DockerStarters
)

// UseDocker provides the docker way. Package dockerbackend calls it when
// imported; without it the docker way is unavailable. It lives apart
// because testcontainers-go links package testing, which a command
// (stockbench) should not.
func UseDocker(s DockerStarters) {
	dockerMu.Lock()
	defer dockerMu.Unlock()
	docker = s
}

// errNoDocker is the docker way's error in a binary built without it.
var errNoDocker = errors.New("backends: docker support is not built into this binary (tests have it; build stockbench with -tags docker)")

// starter is one of DockerStarters.
type starter = func(context.Context) (string, func() error, error)

// startDocker runs the starter pick chooses, or fails when UseDocker was
// not called.
func startDocker(ctx context.Context, pick func(DockerStarters) starter) (string, func() error, error) {
	dockerMu.Lock()
	start := pick(docker)
	dockerMu.Unlock()
	if start == nil {
		return "", nil, errNoDocker
	}
	return start(ctx)
}
