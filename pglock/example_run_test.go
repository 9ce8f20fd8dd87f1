package pglock_test

import (
	"net/url"
	"testing"

	"github.com/jmoiron/sqlx"
	"github.com/stockguard/stockguard/internal/backends/backendstest"
	"github.com/stockguard/stockguard/internal/examplerun"
)

// The examples the docs quote need a server, so go test alone only compiles
// them; this runs them on the test binary's server and checks what they
// print, so a quoted example cannot rot.
func TestExamples_run(t *testing.T) {
	shared := backendstest.SharedPostgres(t).DSN
	old := dsn
	dsn = shared
	t.Cleanup(func() { dsn = old })
	// Example, docs/quickstart.md's, writes the default table, so it gets a
	// database of its own.
	t.Setenv("DATABASE_URL", freshDatabase(t, shared))

	for _, tc := range []struct {
		name    string
		example func()
		want    string
	}{
		{"Example", Example, quickStart},
		{"Example, run again", Example, quickStart}, // as a user runs it twice
		{"ExampleNewBatched", ExampleNewBatched, "left: 7\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := examplerun.Stdout(t, tc.example); got != tc.want {
				t.Errorf("%s printed\n%s\nwant\n%s", tc.name, got, tc.want)
			}
		})
	}
}

// quickStart is what Example, docs/quickstart.md's, prints on every run.
const quickStart = "order taken\norder taken\nleft: 7\n"

// freshDatabase creates an empty database on dsn's server, dropped when t
// ends, and returns dsn naming it.
func freshDatabase(t *testing.T, dsn string) string {
	t.Helper()
	db, err := sqlx.Open("pgx", dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatal(err)
	}
	// WITH (FORCE): the example's pool may not have let go of its sessions.
	u.Path = "/" + examplerun.Database(t, db, " WITH (FORCE)")
	return u.String()
}
