package pglock_test

import (
	"testing"

	"github.com/stockguard/stockguard/internal/backends/backendstest"
	"github.com/stockguard/stockguard/internal/examplerun"
)

// The examples the docs quote need a server, so go test alone only compiles
// them; this runs them on the test binary's server and checks what they
// print, so a quoted example cannot rot.
func TestExamples_run(t *testing.T) {
	old := dsn
	dsn = backendstest.SharedPostgres(t).DSN
	t.Cleanup(func() { dsn = old })
	if got, want := examplerun.Stdout(t, ExampleNewBatched), "left: 7\n"; got != want {
		t.Errorf("ExampleNewBatched printed\n%s\nwant\n%s", got, want)
	}
}
