package mysqltargets

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/jmoiron/sqlx"

	"github.com/stockguard/stockguard"
	"github.com/stockguard/stockguard/bench"
	"github.com/stockguard/stockguard/mysqllock"
)

// Name is the MySQL backend's name in targets' Needs and in bench.Servers.
const Name = "mysql"

// NewInventory builds one app instance of a strategy on table.
type NewInventory func(db *sqlx.DB, table string) (stockguard.Inventory, error)

// Target returns a target whose store is a fresh stock table of mysqllock's
// schema, named after the run's namespace, dropped afterwards; the audit
// reads it back with its own SELECT.
func Target(name, about string, newInv NewInventory) bench.Target {
	return target(name, about, stockTable, newInv)
}

// SegmentedTarget is Target for mysqllock.NewSegmented, whose stock lives
// in the segments table beside the stock table; the audit sums the SKU's
// segments itself.
func SegmentedTarget(name, about string, newInv NewInventory) bench.Target {
	return target(name, about, segmentedTables, newInv)
}

// schema is how a target's stock is laid out.
type schema struct {
	create func(ctx context.Context, db *sqlx.DB, table string) error
	tables func(table string) []string // to drop afterwards
	raw    func(table string) string   // SELECT of one SKU's stock, NULL or no row when unknown
}

var (
	stockTable = schema{
		create: func(ctx context.Context, db *sqlx.DB, table string) error {
			return mysqllock.CreateSchema(ctx, db, mysqllock.WithTable(table))
		},
		tables: func(table string) []string { return []string{table} },
		raw:    func(table string) string { return "SELECT qty FROM `" + table + "` WHERE sku = ?" },
	}
	segmentedTables = schema{
		create: func(ctx context.Context, db *sqlx.DB, table string) error {
			if err := mysqllock.CreateSchema(ctx, db, mysqllock.WithTable(table)); err != nil {
				return err
			}
			return mysqllock.CreateSchema(ctx, db, mysqllock.WithTable(table))
		},
		tables: func(table string) []string { return []string{table, mysqllock.SegmentsTable(table)} },
		raw: func(table string) string {
			return "SELECT SUM(qty) FROM `" + mysqllock.SegmentsTable(table) + "` WHERE sku = ?"
		},
	}
)

func target(name, about string, sc schema, newInv NewInventory) bench.Target {
	// reach builds the Store over the run's table, which create, when set,
	// makes first.
	reach := func(ctx context.Context, s bench.Servers, ns string, create bool) (*bench.Store, error) {
		db, err := bench.Conn[*sqlx.DB](s, Name)
		if err != nil {
			return nil, err
		}
		table := "stockbench_" + ns
		if create {
			if err := sc.create(ctx, db, table); err != nil {
				return nil, err
			}
		}
		raw := sc.raw(table)
		return &bench.Store{
			New: func() (stockguard.Inventory, error) { return newInv(db, table) },
			Raw: func(ctx context.Context, sku string) (int64, error) { return rawRow(ctx, db, raw, sku) },
			Close: func(ctx context.Context) error {
				var errs []error
				for _, t := range sc.tables(table) {
					_, err := db.ExecContext(ctx, "DROP TABLE IF EXISTS `"+t+"`")
					errs = append(errs, err)
				}
				return errors.Join(errs...)
			},
		}, nil
	}
	return bench.Target{
		Name: name, About: about, Needs: []string{Name},
		Open: func(ctx context.Context, s bench.Servers, ns string) (*bench.Store, error) {
			return reach(ctx, s, ns, true)
		},
		Attach: func(ctx context.Context, s bench.Servers, ns string) (*bench.Store, error) {
			st, err := reach(ctx, s, ns, false)
			if err != nil {
				return nil, err
			}
			st.Close = nil // the opening process drops the table
			return st, nil
		},
	}
}

// rawRow reads one integer with query(sku); a missing row is ErrUnknownSKU.
func rawRow(ctx context.Context, db *sqlx.DB, query, sku string) (int64, error) {
	var v sql.NullInt64
	err := db.QueryRowxContext(ctx, query, sku).Scan(&v)
	if errors.Is(err, sql.ErrNoRows) || (err == nil && !v.Valid) {
		return 0, fmt.Errorf("%w: no row for %q", stockguard.ErrUnknownSKU, sku)
	}
	return v.Int64, err
}
