package redislock_test

import (
	"testing"

	"github.com/stockguard/stockguard/internal/backends/backendstest"
	"github.com/stockguard/stockguard/internal/examplerun"
)

// The example the README quotes needs a server, so go test alone only
// compiles it; this runs it on the test binary's server and checks what it
// prints, so a quoted example cannot rot.
func TestExamples_run(t *testing.T) {
	srv := backendstest.SharedRedis(t)
	// Example takes a fixed order ID under the prefix "shop:", so that
	// prefix starts empty: a second run (-count=2) ends as the first.
	rdb := srv.Client()
	defer rdb.Close()
	keys, err := rdb.Keys(t.Context(), "shop:*").Result()
	if err != nil {
		t.Fatal(err)
	}
	if len(keys) > 0 {
		if err := rdb.Del(t.Context(), keys...).Err(); err != nil {
			t.Fatal(err)
		}
	}
	t.Setenv("REDIS_ADDR", srv.Addr)
	if got, want := examplerun.Stdout(t, Example), "order-1001 taken\norder-1001 taken\nleft: 7\n"; got != want {
		t.Errorf("Example printed\n%s\nwant\n%s", got, want)
	}
}
