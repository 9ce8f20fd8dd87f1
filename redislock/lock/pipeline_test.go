package lock

import (
	"context"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stockguard/stockguard/internal/backends/backendstest"
)

// pipelineHook counts the pipelines of more than one script a client
// sends, and every command sent.
type pipelineHook struct{ pipelines, cmds atomic.Int64 }

func (h *pipelineHook) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *pipelineHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		h.cmds.Add(1)
		return next(ctx, cmd)
	}
}

func (h *pipelineHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		h.cmds.Add(int64(len(cmds)))
		if len(cmds) > 1 && cmds[0].Name() == "evalsha" {
			h.pipelines.Add(1)
		}
		return next(ctx, cmds)
	}
}

// TestClient_Obtain_concurrentCallsShareOnePipeline: 32 goroutines locking
// keys of their own send their scripts together, and every lock comes out
// right — obtained, fenced, released — also after Redis forgot the scripts.
func TestClient_Obtain_concurrentCallsShareOnePipeline(t *testing.T) {
	rdb := backendstest.PrivateRedis(t, 1)[0].Client()
	t.Cleanup(func() { rdb.Close() })
	hook := &pipelineHook{}
	rdb.AddHook(hook)
	c, err := New(rdb)
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	for round := range 2 {
		if round == 1 {
			// NOSCRIPT for every batched EVALSHA: each is run again with EVAL.
			if err := rdb.ScriptFlush(ctx).Err(); err != nil {
				t.Fatal(err)
			}
		}
		var wg sync.WaitGroup
		for g := range 32 {
			wg.Go(func() {
				for i := range 50 {
					key := strconv.Itoa(g)
					l, err := c.Obtain(ctx, key, 10*time.Second)
					if err != nil {
						t.Error(err)
						return
					}
					if want := int64(round*50 + i + 1); l.Token() != want {
						t.Errorf("key %s: token %d, want %d", key, l.Token(), want)
					}
					if err := l.Release(ctx); err != nil {
						t.Error(err)
						return
					}
				}
			})
		}
		wg.Wait()
	}
	if hook.pipelines.Load() == 0 {
		t.Fatal("no two lock scripts were sent together")
	}
	if n := rdb.DBSize(ctx).Val(); n != 32 {
		t.Fatalf("%d keys left, want the 32 fencing counters", n)
	}
}

// TestScriptPipe_run_endedContextIsNotSent: a call whose context ended while
// it waited for its turn is answered with the context's error, unsent.
func TestScriptPipe_run_endedContextIsNotSent(t *testing.T) {
	_, rdb := newTestClient(t)
	hook := &pipelineHook{}
	rdb.AddHook(hook)
	p := newScriptPipe(rdb)
	p.busy = true // a batch in flight: the call queues
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan *redis.Cmd)
	go func() { done <- p.run(ctx, lockPTTLScript, []string{"k"}, "owner") }()
	for {
		p.mu.Lock()
		n := len(p.queue)
		p.mu.Unlock()
		if n == 1 {
			break
		}
		time.Sleep(time.Millisecond)
	}
	cancel()
	p.next() // the batch in flight is back: the queued call's turn
	cmd := <-done
	if err := cmd.Err(); err != context.Canceled {
		t.Fatalf("run after its context ended = %v, want context.Canceled", err)
	}
	if n := hook.cmds.Load(); n != 0 {
		t.Fatalf("%d commands sent for a call whose context had ended", n)
	}
	if p.busy {
		t.Fatal("the pipe is still busy after its last call")
	}
}

// TestScriptPipe_run_loadsScriptsRedisDoesNotHave: a batch of EVALSHAs of a
// script Redis has never seen (NOSCRIPT) is run again with EVAL.
func TestScriptPipe_run_loadsScriptsRedisDoesNotHave(t *testing.T) {
	_, rdb := newTestClient(t)
	hook := &pipelineHook{}
	rdb.AddHook(hook)
	p := newScriptPipe(rdb)
	script := redis.NewScript("return ARGV[1] .. '" + lockPrefix(t) + "'") // new to Redis
	p.busy = true
	results := make(chan *redis.Cmd, 3)
	for i := range 3 {
		go func() { results <- p.run(t.Context(), script, []string{"k"}, strconv.Itoa(i)) }()
	}
	for {
		p.mu.Lock()
		n := len(p.queue)
		p.mu.Unlock()
		if n == 3 {
			break
		}
		time.Sleep(time.Millisecond)
	}
	p.next()
	for range 3 {
		if _, err := (<-results).Text(); err != nil {
			t.Fatal(err)
		}
	}
	if hook.pipelines.Load() != 1 {
		t.Fatalf("%d pipelines sent, want the one batch", hook.pipelines.Load())
	}
}
