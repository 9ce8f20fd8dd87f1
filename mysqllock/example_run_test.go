package mysqllock_test

import (
	"testing"

	"github.com/go-sql-driver/mysql"
	"github.com/jmoiron/sqlx"
	"github.com/stockguard/stockguard/internal/backends/backendstest"
	"github.com/stockguard/stockguard/internal/examplerun"
)

// The examples the docs quote need a server, so go test alone only compiles
// them; this runs them on the test binary's server and checks what they
// print, so a quoted example cannot rot.
func TestExamples_run(t *testing.T) {
	cfg := backendstest.SharedMySQL(t).Config()
	cfg.InterpolateParams = true
	t.Setenv("STOCKGUARD_MYSQL_DSN", cfg.FormatDSN()) // for open, which the other examples use
	// Example, the README's quick start, writes the default table, so it
	// gets a database of its own.
	t.Setenv("MYSQL_DSN", freshDatabase(t, cfg.FormatDSN()))

	for _, tc := range []struct {
		name    string
		example func()
		want    string
	}{
		{"Example", Example, quickStart},
		{"Example, run again", Example, quickStart}, // as a user runs it twice
		{"Example_checkout", Example_checkout, "held: tee-m 3, mug 1\nconfirmed: taken [{mug 1} {tee-m 2}]\nreturned: tee-m 5, mug 2\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := examplerun.Stdout(t, tc.example); got != tc.want {
				t.Errorf("%s printed\n%s\nwant\n%s", tc.name, got, tc.want)
			}
		})
	}
}

// quickStart is what Example, the README's quick start, prints on every
// run.
const quickStart = "order taken\norder taken\nleft: 7\n"

// freshDatabase creates an empty database on dsn's server, dropped when t
// ends, and returns dsn naming it.
func freshDatabase(t *testing.T, dsn string) string {
	t.Helper()
	db, err := sqlx.Open("mysql", dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	cfg, err := mysql.ParseDSN(dsn)
	if err != nil {
		t.Fatal(err)
	}
	cfg.DBName = examplerun.Database(t, db, "")
	return cfg.FormatDSN()
}
