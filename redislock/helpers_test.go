package redislock

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stockguard/stockguard/internal/backends"
	"github.com/stockguard/stockguard/internal/backends/backendstest"
	"github.com/stockguard/stockguard/redislock/lock"
)

// lockPrefix returns a key prefix unique to t, so tests sharing a server
// never see each other's keys.
func lockPrefix(t testing.TB) string {
	return fmt.Sprintf("%s-%08x:", strings.ReplaceAll(t.Name(), "/", "."), rand.Uint32())
}

// testNodeTimeout is for tests that are not about the node timeout: a live
// master answers well within it however loaded the machine, so that it
// never reads as failed (package lock's tests say more).
const testNodeTimeout = 10 * time.Second

// masters starts n private Redis servers and returns them with a client
// on each. The clients do not retry: a call to a master a test killed
// fails at its refused dial.
func masters(t *testing.T, n int) ([]*backends.Redis, []redis.UniversalClient) {
	t.Helper()
	servers := backendstest.PrivateRedis(t, n)
	clients := make([]redis.UniversalClient, n)
	for i, s := range servers {
		c := redis.NewClient(&redis.Options{Addr: s.Addr, PoolSize: 128, MaxRetries: -1})
		t.Cleanup(func() { c.Close() })
		clients[i] = c
	}
	return servers, clients
}

// lockedOn returns the masters that hold key's lock under the Redlock's
// key names. Every master must answer (pass only live ones).
func lockedOn(t *testing.T, r *lock.Redlock, clients []redis.UniversalClient, key string) []int {
	t.Helper()
	var on []int
	for i, c := range clients {
		ctx, cancel := context.WithTimeout(t.Context(), time.Minute) // a hang guard only
		n, err := c.Exists(ctx, r.LockKey(key)).Result()
		cancel()
		if err != nil {
			t.Fatalf("master %d: %v", i, err)
		}
		if n == 1 {
			on = append(on, i)
		}
	}
	return on
}

// scriptHook counts the runs of one script (EVALSHA) on a client.
type scriptHook struct {
	script *redis.Script
	runs   atomic.Int64
}

func (h *scriptHook) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *scriptHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if a := cmd.Args(); len(a) > 1 && a[1] == h.script.Hash() {
			h.runs.Add(1)
		}
		return next(ctx, cmd)
	}
}

func (h *scriptHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}
