// Package tidbtargets registers the TiDB backend with package bench — how
// stockbench reaches a TiDB server, its flag -tidb-dsn — and every MySQL
// strategy of package mysqltargets again on it, named tidb-… instead of
// mysql-… (tidb-atomic, tidb-batched, …; not mysql-namedlock, which
// refuses TiDB), plus tidb-atomic-autocommit:
// mysqllock.NewAtomic with MySQL's autocommit UPDATE, as TiDB runs it by
// default, to measure what the engine-aware path gains. They run only when
// -strategies names them (tidb-*).
//
// Targets find a *sqlx.DB under the name "tidb" in bench.Servers.
package tidbtargets

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"strings"

	"github.com/go-sql-driver/mysql"
	"github.com/jmoiron/sqlx"

	"github.com/stockguard/stockguard"
	"github.com/stockguard/stockguard/bench"
	"github.com/stockguard/stockguard/bench/mysqltargets"
	"github.com/stockguard/stockguard/internal/backends"
	"github.com/stockguard/stockguard/mysqllock"
)

// Name is the TiDB backend's name in targets' Needs and in bench.Servers.
const Name = "tidb"

// Backend is the TiDB server: the one -tidb-dsn names, else the one
// package backends resolves (STOCKGUARD_TIDB_DSN, else a private
// tidb-server from PATH or scripts/build-tidb.sh, else Docker in a binary
// that has it). It is opened as the MySQL backend opens its server.
var Backend = bench.Backend{
	Name:  Name,
	About: "TiDB: -tidb-dsn, else STOCKGUARD_TIDB_DSN, else a private tidb-server (PATH, or built by scripts/build-tidb.sh)",
	Flags: func(fs *flag.FlagSet) bench.Opener {
		dsn := fs.String("tidb-dsn", "", "TiDB DSN, e.g. root@tcp(127.0.0.1:4000)/test (default: resolved, see Backends)")
		return bench.Opener{
			Check: func() error {
				if *dsn == "" {
					return nil
				}
				if _, err := mysql.ParseDSN(*dsn); err != nil {
					return fmt.Errorf("-tidb-dsn: %w", err)
				}
				return nil
			},
			Open: func(ctx context.Context, oc bench.OpenConfig) (*bench.Opened, error) { return open(ctx, *dsn, oc) },
		}
	},
}

// open resolves the server unless dsn names one, then opens it through the
// MySQL backend's opener, told its DSN.
func open(ctx context.Context, dsn string, oc bench.OpenConfig) (*bench.Opened, error) {
	source, stop := "-tidb-dsn", func() error { return nil }
	if dsn == "" {
		m, err := backends.ResolveTiDB(ctx)
		if err != nil {
			return nil, err
		}
		dsn, source, stop = m.DSN, string(m.Source), m.Close
	}
	fs := flag.NewFlagSet(Name, flag.ContinueOnError)
	opener := mysqltargets.Backend.Flags(fs)
	if err := fs.Set("mysql-dsn", dsn); err != nil {
		stop()
		return nil, err
	}
	o, err := opener.Open(ctx, oc)
	if err != nil {
		stop()
		return nil, fmt.Errorf("tidb: %w", err)
	}
	for i := range o.Servers {
		o.Servers[i].Backend, o.Servers[i].Source = Name, source
	}
	o.Args = []string{"-tidb-dsn", dsn}
	closeDB := o.Close
	o.Close = func() error { return errors.Join(closeDB(), stop()) }
	return o, nil
}

func init() {
	bench.RegisterBackend(Backend)
	rename := map[string]string{mysqltargets.Name: Name}
	for _, t := range bench.Targets() {
		if len(t.Needs) == 0 || t.Needs[0] != mysqltargets.Name || t.OnRequest {
			continue
		}
		name, ok := strings.CutPrefix(t.Name, mysqltargets.Name+"-")
		if !ok || name == "namedlock" {
			// mysqllock.NewNamedLock refuses TiDB (see its doc).
			continue
		}
		bench.Register(bench.Variant(t, Name+"-"+name, rename))
	}
	autocommit := bench.OrdersTarget(mysqltargets.Target("mysql-atomic-autocommit",
		"mysql-atomic without engine awareness: the autocommit UPDATE, optimistic on TiDB by default",
		func(db *sqlx.DB, table string) (stockguard.Inventory, error) {
			return mysqllock.NewAtomic(db, mysqllock.WithTable(table), mysqllock.WithEngine(mysqllock.EngineMySQL))
		}))
	bench.Register(bench.Variant(autocommit, Name+"-atomic-autocommit", rename))
}
