// Package sqlpool tells which database server a pool's driver speaks, so
// that mysqllock and pglock refuse, before any I/O, a pool opened for the
// other one: over the wrong server every statement would fail later with
// a message about SQL the caller never wrote.
package sqlpool

import (
	"fmt"
	"reflect"
	"strings"

	"github.com/jmoiron/sqlx"
)

// Server is the database server a driver speaks; Unknown when the driver
// is not one this package knows.
type Server string

// The servers a known driver speaks.
const (
	Unknown    Server = ""
	MySQL      Server = "MySQL"
	PostgreSQL Server = "PostgreSQL"
)

// byPackage maps a driver's Go package (a prefix of it) to its server.
var byPackage = []struct {
	pkg    string
	server Server
}{
	{"github.com/go-sql-driver/mysql", MySQL},
	{"github.com/jackc/pgx/", PostgreSQL},
	{"github.com/lib/pq", PostgreSQL},
}

// byName maps the driver names sqlx knows (sqlx.Open's first argument) to
// their server, for a driver whose package byPackage does not know.
var byName = map[string]Server{
	"mysql": MySQL, "nrmysql": MySQL,
	"pgx": PostgreSQL, "pgx/v5": PostgreSQL, "postgres": PostgreSQL, "pq-timeouts": PostgreSQL,
	"cloudsqlpostgres": PostgreSQL, "nrpostgres": PostgreSQL, "cockroach": PostgreSQL,
}

// Of returns the server db's driver speaks, from the driver's Go package
// and else from the name the pool was opened with; Unknown for a driver
// neither tells (a wrapping driver, say).
func Of(db *sqlx.DB) Server {
	t := reflect.TypeOf(db.Driver())
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t != nil {
		for _, d := range byPackage {
			if strings.HasPrefix(t.PkgPath(), d.pkg) {
				return d.server
			}
		}
	}
	return byName[db.DriverName()]
}

// pools says, for each server, which package serves it and how to open
// the pool it takes.
var pools = map[Server]struct{ pkg, open string }{
	MySQL:      {"mysqllock", `sqlx.Open("mysql", dsn)`},
	PostgreSQL: {"pglock", `sqlx.Open("pgx", dsn)`},
}

// Check returns an error naming the mistake when db's driver is known to
// speak another server than want; nil when it speaks want, when its server
// is unknown, and for a nil db.
func Check(db *sqlx.DB, want Server) error {
	if db == nil {
		return nil
	}
	got := Of(db)
	if got == Unknown || got == want {
		return nil
	}
	return fmt.Errorf("a %s pool (driver %q, %T) given to %s, which needs a %s pool (%s); for %s use %s",
		got, db.DriverName(), db.Driver(), pools[want].pkg, want, pools[want].open, got, pools[got].pkg)
}
