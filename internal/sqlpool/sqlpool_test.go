package sqlpool

import (
	"database/sql"
	"database/sql/driver"
	"errors"
	"strings"
	"testing"

	_ "github.com/go-sql-driver/mysql"
	_ "github.com/jackc/pgx/v5/stdlib"
	"github.com/jmoiron/sqlx"
)

// wrapper stands for a driver wrapping another (otelsql, say): its package
// tells nothing, the name the pool was opened with does.
type wrapper struct{}

func (wrapper) Open(string) (driver.Conn, error) { return nil, errors.New("never dialled") }

func init() { sql.Register("stockguard-wrapper", wrapper{}) }

func open(t *testing.T, driverName, dsn, sqlxName string) *sqlx.DB {
	t.Helper()
	db, err := sql.Open(driverName, dsn) // never dialled
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return sqlx.NewDb(db, sqlxName)
}

func TestOf(t *testing.T) {
	for _, c := range []struct {
		driver, dsn, name string
		want              Server
	}{
		{"mysql", "root@tcp(127.0.0.1:1)/x", "mysql", MySQL},
		{"pgx", "postgres://127.0.0.1:1/x", "pgx", PostgreSQL},
		{"pgx", "postgres://127.0.0.1:1/x", "anything", PostgreSQL}, // the driver's package decides
		{"stockguard-wrapper", "", "mysql", MySQL},
		{"stockguard-wrapper", "", "postgres", PostgreSQL},
		{"stockguard-wrapper", "", "wrapped", Unknown},
	} {
		if got := Of(open(t, c.driver, c.dsn, c.name)); got != c.want {
			t.Errorf("driver %s opened as %q: %q, want %q", c.driver, c.name, got, c.want)
		}
	}
}

// Check names the mistake and the package to use; a pool it cannot tell,
// and a nil one, pass.
func TestCheck(t *testing.T) {
	pg := open(t, "pgx", "postgres://127.0.0.1:1/x", "pgx")
	err := Check(pg, MySQL)
	if err == nil || !strings.Contains(err.Error(), "a PostgreSQL pool") || !strings.Contains(err.Error(), "use pglock") {
		t.Errorf("Check(pgx pool, MySQL) = %v", err)
	}
	if err := Check(pg, PostgreSQL); err != nil {
		t.Errorf("Check(pgx pool, PostgreSQL) = %v", err)
	}
	if err := Check(open(t, "stockguard-wrapper", "", "wrapped"), MySQL); err != nil {
		t.Errorf("Check(unknown driver) = %v", err)
	}
	if err := Check(nil, PostgreSQL); err != nil {
		t.Errorf("Check(nil) = %v", err)
	}
}
