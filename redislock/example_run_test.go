package redislock_test

import (
	"testing"

	"github.com/stockguard/stockguard/internal/backends/backendstest"
	"github.com/stockguard/stockguard/internal/examplerun"
)

// The example docs/quickstart.md quotes needs a server, so go test alone
// only compiles it; this runs it twice in a row on the test binary's
// server, as a user runs it twice, and checks what it prints each time, so
// a quoted example cannot rot.
func TestExamples_run(t *testing.T) {
	t.Setenv("REDIS_ADDR", backendstest.SharedRedis(t).Addr)
	for run := range 2 {
		if got, want := examplerun.Stdout(t, Example), "order taken\norder taken\nleft: 7\n"; got != want {
			t.Errorf("Example, run %d, printed\n%s\nwant\n%s", run+1, got, want)
		}
	}
}
