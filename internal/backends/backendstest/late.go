package backendstest

import (
	"context"
	"net"
	"regexp"
	"testing"

	"github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/jmoiron/sqlx"

	"github.com/stockguard/stockguard/internal/netgate"
)

var nonIdent = regexp.MustCompile(`[^A-Za-z0-9_]+`)

// LateMySQL returns the pool setting (for DB's edit) that sends a MySQL
// pool's connections through l: a dial registered with the driver under
// a network name of tb's own.
func LateMySQL(tb testing.TB, l *netgate.Late) func(*mysql.Config) {
	name := "late-" + nonIdent.ReplaceAllString(tb.Name(), "_")
	mysql.RegisterDialContext(name, func(ctx context.Context, addr string) (net.Conn, error) {
		return l.Dial(ctx, "tcp", addr)
	})
	return func(c *mysql.Config) { c.Net = name }
}

// LatePostgres opens a database/sql pool (driver pgx) on the shared
// PostgreSQL server whose connections go through l, closed when tb ends.
func LatePostgres(tb testing.TB, l *netgate.Late) *sqlx.DB {
	tb.Helper()
	cfg, err := pgx.ParseConfig(SharedPostgres(tb).DSN)
	if err != nil {
		tb.Fatal(err)
	}
	cfg.DialFunc = l.Dial
	db := sqlx.NewDb(stdlib.OpenDB(*cfg), "pgx")
	db.SetMaxOpenConns(128)
	db.SetMaxIdleConns(128)
	tb.Cleanup(func() { db.Close() })
	return db
}
