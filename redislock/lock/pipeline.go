package lock

import (
	"context"
	"errors"
	"strings"
	"sync"

	"github.com/redis/go-redis/v9"
)

// pipeliner is what a client needs to send several commands in one go;
// every redis.UniversalClient has it.
type pipeliner interface {
	Pipeline() redis.Pipeliner
}

// scriptPipe sends the lock scripts that a Client's goroutines run at the same
// time as one pipeline: one write and one read for all of them instead of
// one each, on the client and on Redis, which is where an uncontended lock
// cycle spends its time. It is group commit: a call that finds no batch in
// flight sends at once, alone, as Script.Run would; calls arriving while a
// batch is in flight queue up, and the first of them sends the whole queue
// when that batch is back. A lone caller therefore waits no longer than
// without it.
//
// Only idempotent scripts go through it — a pipeline is resent whole after a
// network error — and a call whose context has ended before its batch is
// sent is not sent at all.
type scriptPipe struct {
	rdb  redis.Scripter
	pipe pipeliner // nil when rdb cannot pipeline: every call goes alone

	mu    sync.Mutex
	busy  bool // a batch is in flight, or its sender is about to send one
	queue []*pipeCall
}

// pipeCall is one script run.
type pipeCall struct {
	ctx    context.Context
	script *redis.Script
	keys   []string
	args   []any
	cmd    *redis.Cmd
	// turn receives true when the call is to send the queue itself, false
	// when its cmd has been answered by another call's batch.
	turn chan bool
}

func newScriptPipe(rdb redis.Scripter) *scriptPipe {
	b := &scriptPipe{rdb: rdb}
	b.pipe, _ = rdb.(pipeliner)
	return b
}

// run runs script as script.Run(ctx, rdb, keys, args...) would, batched
// with the calls of other goroutines made meanwhile.
func (b *scriptPipe) run(ctx context.Context, script *redis.Script, keys []string, args ...any) *redis.Cmd {
	if b.pipe == nil {
		return script.Run(ctx, b.rdb, keys, args...)
	}
	b.mu.Lock()
	if !b.busy {
		b.busy = true
		b.mu.Unlock()
		cmd := script.Run(ctx, b.rdb, keys, args...)
		b.next()
		return cmd
	}
	c := &pipeCall{ctx: ctx, script: script, keys: keys, args: args, turn: make(chan bool, 1)}
	b.queue = append(b.queue, c)
	b.mu.Unlock()
	if !<-c.turn {
		return c.cmd
	}
	b.mu.Lock()
	batch := b.queue
	b.queue = nil
	b.mu.Unlock()
	b.send(ctx, batch)
	b.next()
	return c.cmd
}

// next passes the turn to the first queued call, or ends the busy spell.
func (b *scriptPipe) next() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.queue) == 0 {
		b.busy = false
		return
	}
	b.queue[0].turn <- true
}

// send runs batch, whose first call is the sender's own, as one pipeline
// and answers every call; the sender's is answered by its return. ctx is
// the sender's, its cancellation cut off: the batch carries other callers'
// scripts.
func (b *scriptPipe) send(ctx context.Context, batch []*pipeCall) {
	live := batch[:0:0]
	for _, c := range batch {
		if err := c.ctx.Err(); err != nil {
			c.cmd = redis.NewCmd(c.ctx)
			c.cmd.SetErr(err) // never sent
			continue
		}
		live = append(live, c)
	}
	if len(live) == 1 {
		c := live[0]
		c.cmd = c.script.Run(c.ctx, b.rdb, c.keys, c.args...)
	} else if len(live) > 1 {
		ctx := context.WithoutCancel(ctx)
		pipe := b.pipe.Pipeline()
		for _, c := range live {
			c.cmd = c.script.EvalSha(ctx, pipe, c.keys, c.args...)
		}
		_, _ = pipe.Exec(ctx) // each command carries its own error
		for _, c := range live {
			if noScript(c.cmd.Err()) {
				// Redis forgot the script (a restart, SCRIPT FLUSH): Run
				// loads it with EVAL.
				c.cmd = c.script.Run(ctx, b.rdb, c.keys, c.args...)
			}
		}
	}
	for _, c := range batch[1:] {
		c.turn <- false
	}
}

// noScript reports whether err is Redis's NOSCRIPT reply to an EVALSHA.
func noScript(err error) bool {
	var reply redis.Error
	return errors.As(err, &reply) && strings.HasPrefix(reply.Error(), "NOSCRIPT")
}
