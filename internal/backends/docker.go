package backends

import (
	"context"
	"errors"
)

func startDockerMySQL(ctx context.Context) (*MySQL, error) {
	return nil, errors.New("docker: not yet wired")
}

func startDockerRedis(ctx context.Context) (*Redis, error) {
	return nil, errors.New("docker: not yet wired")
}
