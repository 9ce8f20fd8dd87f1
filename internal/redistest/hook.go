package redistest

import (
	"context"

	"github.com/redis/go-redis/v9"
)

// OnProcess is a redis.Hook that calls itself before each command a client
// processes alone (dials and pipelines pass through): a non-nil error fails
// the command unsent.
type OnProcess func(ctx context.Context, cmd redis.Cmder) error

func (f OnProcess) DialHook(next redis.DialHook) redis.DialHook { return next }

func (f OnProcess) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

func (f OnProcess) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if err := f(ctx, cmd); err != nil {
			cmd.SetErr(err)
			return err
		}
		return next(ctx, cmd)
	}
}
