package mysqllock_test

import (
	"io"
	"os"
	"strings"
	"testing"

	"github.com/stockguard/stockguard/internal/backends/backendstest"
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
			if got := stdout(t, tc.example); got != tc.want {
				t.Errorf("%s printed\n%s\nwant\n%s", tc.name, got, tc.want)
			}
		})
	}
}

// stdout runs f and returns what it wrote to os.Stdout.
func stdout(t *testing.T, f func()) string {
	t.Helper()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	saved := os.Stdout
	os.Stdout = w
	read := make(chan string)
	go func() {
		var b strings.Builder
		io.Copy(&b, r)
		read <- b.String()
	}()
	defer func() {
		os.Stdout = saved
	}()
	f()
	w.Close()
	out := <-read
	r.Close()
	return out
}
