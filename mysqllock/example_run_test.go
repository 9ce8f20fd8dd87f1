package mysqllock_test

import (
	"testing"

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
	old := dsn
	dsn = cfg.FormatDSN()
	t.Cleanup(func() { dsn = old })

	for _, tc := range []struct {
		name    string
		example func()
		want    string
	}{
		{"Example", Example, "sold 3\nleft: 7\n"},
		{"Example_checkout", Example_checkout, "held: tee-m 3, mug 1\nconfirmed: taken [{mug 1} {tee-m 2}]\nreturned: tee-m 5, mug 2\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := examplerun.Stdout(t, tc.example); got != tc.want {
				t.Errorf("%s printed\n%s\nwant\n%s", tc.name, got, tc.want)
			}
		})
	}
}
