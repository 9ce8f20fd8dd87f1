package main

import (
	"errors"
	"strings"
	"testing"

	"github.com/stockguard/stockguard/bench"
	"github.com/stockguard/stockguard/internal/backends"
	"github.com/stockguard/stockguard/internal/backends/backendstest"
)

// TestRun_durable starts a durable private MariaDB for -durable and reports
// the settings the server itself reports; a server that is not durable is
// refused rather than measured under the wrong name.
func TestRun_durable(t *testing.T) {
	backendstest.SkipShort(t)
	t.Setenv(backends.EnvMySQLDSN, "")
	t.Setenv(backends.EnvBackend, string(backends.SourceLocal))
	atomic, ok := bench.Lookup("mysql-atomic")
	if !ok {
		t.Fatal("mysql-atomic is not registered")
	}
	code, stdout, stderr := invoke(t, []bench.Target{atomic}, append(quick, "-durable", "-workers", "4")...)
	if code != exitOK {
		if strings.Contains(stderr, "no server available") {
			backendstest.Unavailable(t, errors.New(stderr))
		}
		t.Fatalf("exit %d: %s", code, stderr)
	}
	if !strings.Contains(stdout, "innodb_flush_log_at_trx_commit=1 log_bin=ON sync_binlog=1") || !strings.Contains(stdout, "(local)") {
		t.Errorf("servers line lacks the durable settings:\n%s", stdout)
	}

	lazy, err := backends.StartLocalMySQL(t.Context())
	if err != nil {
		backendstest.Unavailable(t, err)
	}
	t.Cleanup(func() { lazy.Close() })
	code, _, stderr = invoke(t, []bench.Target{atomic}, append(quick, "-durable", "-workers", "4", "-mysql-dsn", lazy.DSN)...)
	if code != exitError || !strings.Contains(stderr, "-durable, but the server runs with innodb_flush_log_at_trx_commit=2 log_bin=OFF") {
		t.Errorf("-durable on a lazy server: exit %d, stderr %s", code, stderr)
	}
}
