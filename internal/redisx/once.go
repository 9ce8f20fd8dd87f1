package redisx

import (
	"context"

	"github.com/redis/go-redis/v9"
)

// Once marks cmd so that go-redis sends it at most once. By default go-redis
// resends a command after a read timeout or a dropped connection (up to
// Options.MaxRetries times), which for a decrement that did reach the server
// takes the stock twice and acknowledges it once. Pass the result to
// Process (or to a pipeline's Process, which then is not resent either); the
// caller keeps cmd to read the reply.
func Once(cmd redis.Cmder) redis.Cmder { return once{cmd} }

// once embeds the Cmder interface, so it is a Cmder itself (the unexported
// methods are promoted) and overrides only the retry gate.
type once struct{ redis.Cmder }

func (once) NoRetry() bool { return true }

// ScriptClient is what running a script needs: redis.Scripter for
// redis.Script, Process for sending commands with Once. *redis.Client,
// *redis.ClusterClient, *redis.Ring and every redis.UniversalClient
// satisfy it.
type ScriptClient interface {
	redis.Scripter
	Process(ctx context.Context, cmd redis.Cmder) error
}

// OnceScripter returns c with EVAL and EVALSHA sent at most once (see Once),
// for redis.Script.Run: its EVALSHA-then-EVAL fallback stays, and a script
// whose reply is lost is reported, not run again.
func OnceScripter(c ScriptClient) redis.Scripter { return onceScripter{c} }

type onceScripter struct{ ScriptClient }

func (s onceScripter) Eval(ctx context.Context, script string, keys []string, args ...any) *redis.Cmd {
	return s.eval(ctx, "eval", script, keys, args)
}

func (s onceScripter) EvalSha(ctx context.Context, sha1 string, keys []string, args ...any) *redis.Cmd {
	return s.eval(ctx, "evalsha", sha1, keys, args)
}

func (s onceScripter) eval(ctx context.Context, name, payload string, keys []string, args []any) *redis.Cmd {
	cmd := evalCmd(ctx, name, payload, keys, args)
	_ = s.Process(ctx, Once(cmd))
	return cmd
}
