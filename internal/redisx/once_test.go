package redisx

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/redis/go-redis/v9"
	"github.com/stockguard/stockguard/internal/backends/backendstest"
	"github.com/stockguard/stockguard/internal/redisx/cutproxy"
)

func TestMain(m *testing.M) { backendstest.Main(m) }

// incrReplyLost sends INCR through a proxy that drops the reply after the
// server has applied it, and returns how many times it was applied.
func incrReplyLost(t *testing.T, once bool) int64 {
	srv := backendstest.SharedRedis(t)
	proxy := cutproxy.Start(t, srv.Addr)
	rdb := redis.NewClient(&redis.Options{Addr: proxy.Addr, MaxRetries: 3})
	t.Cleanup(func() { rdb.Close() })
	ctx := t.Context()
	key := fmt.Sprintf("redisx-test:%s:%d", t.Name(), rand.Int64())
	t.Cleanup(func() { rdb.Del(context.Background(), key) })
	if err := rdb.Ping(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	proxy.CutNextReply()
	cmd := redis.NewIntCmd(ctx, "incr", key)
	if once {
		rdb.Process(ctx, Once(cmd))
		if cmd.Err() == nil || NotSent(cmd.Err()) {
			t.Fatalf("INCR with its reply lost: err = %v, want an error after sending", cmd.Err())
		}
	} else {
		rdb.Process(ctx, cmd)
	}
	n, err := rdb.Get(ctx, key).Int64()
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func TestOnce_notResentAfterLostReply(t *testing.T) {
	if n := incrReplyLost(t, true); n != 1 {
		t.Fatalf("INCR sent with Once was applied %d times, want 1", n)
	}
}

// TestOnce_control shows the hazard Once removes: go-redis resends a command
// whose reply was lost, and both copies are applied.
func TestOnce_control(t *testing.T) {
	if n := incrReplyLost(t, false); n != 2 {
		t.Fatalf("INCR without Once was applied %d times; expected go-redis to resend it once", n)
	}
}
