package tiered_test

import (
	"testing"

	"github.com/stockguard/stockguard/internal/backends/backendstest"
	"github.com/stockguard/stockguard/internal/examplerun"
)

// The example the docs quote needs servers, so go test alone only compiles
// it; this runs it on the test binary's servers and checks what it prints,
// so a quoted example cannot rot.
func TestExamples_run(t *testing.T) {
	cfg := backendstest.SharedMySQL(t).Config()
	cfg.InterpolateParams = true
	t.Setenv("STOCKGUARD_MYSQL_DSN", cfg.FormatDSN())
	oldDSN, oldAddr := mysqlDSN, redisAddr
	mysqlDSN, redisAddr = cfg.FormatDSN(), backendstest.SharedRedis(t).Addr
	t.Cleanup(func() { mysqlDSN, redisAddr = oldDSN, oldAddr })
	if got, want := examplerun.Stdout(t, ExampleNew), "left: 7\nin MySQL: taken [{sku-42 3}]\n"; got != want {
		t.Errorf("ExampleNew printed\n%s\nwant\n%s", got, want)
	}
}
