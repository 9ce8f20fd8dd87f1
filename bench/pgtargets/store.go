package pgtargets

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/jmoiron/sqlx"

	"github.com/stockguard/stockguard"
	"github.com/stockguard/stockguard/bench"
	"github.com/stockguard/stockguard/pglock"
)

// NewInventory builds one app instance of a strategy on table.
type NewInventory func(db *sqlx.DB, table string) (stockguard.Inventory, error)

// Target returns a target, on request, whose store is a fresh set of
// pglock's tables named after the run's namespace, dropped afterwards; the
// audit reads the stock table back with its own SELECT.
func Target(name, about string, newInv NewInventory) bench.Target {
	return target(name, about, `SELECT qty FROM %q WHERE sku = $1`, func(t string) string { return t }, newInv)
}

// SegmentedTarget is Target for pglock.NewSegmented, whose stock lives in
// the segments table; the audit sums the SKU's segments itself.
func SegmentedTarget(name, about string, newInv NewInventory) bench.Target {
	return target(name, about, `SELECT SUM(qty)::bigint FROM %q WHERE sku = $1`, pglock.SegmentsTable, newInv)
}

func target(name, about, rawFormat string, rawTable func(string) string, newInv NewInventory) bench.Target {
	reach := func(ctx context.Context, s bench.Servers, ns string, create bool) (*bench.Store, error) {
		db, err := bench.Conn[*sqlx.DB](s, Name)
		if err != nil {
			return nil, err
		}
		table := "stockbench_" + ns
		if create {
			if err := pglock.CreateSchema(ctx, db, pglock.WithTable(table)); err != nil {
				return nil, err
			}
		}
		raw := fmt.Sprintf(rawFormat, rawTable(table))
		return &bench.Store{
			New: func() (stockguard.Inventory, error) { return newInv(db, table) },
			Raw: func(ctx context.Context, sku string) (int64, error) {
				var v sql.NullInt64
				err := db.QueryRowxContext(ctx, raw, sku).Scan(&v)
				if errors.Is(err, sql.ErrNoRows) || (err == nil && !v.Valid) {
					return 0, fmt.Errorf("%w: no row for %q", stockguard.ErrUnknownSKU, sku)
				}
				return v.Int64, err
			},
			Close: func(ctx context.Context) error {
				var errs []error
				for _, t := range pglock.Tables(table) {
					_, err := db.ExecContext(ctx, fmt.Sprintf("DROP TABLE IF EXISTS %q", t))
					errs = append(errs, err)
				}
				return errors.Join(errs...)
			},
		}, nil
	}
	return bench.Target{
		Name: name, About: about, Needs: []string{Name}, OnRequest: true,
		Open: func(ctx context.Context, s bench.Servers, ns string) (*bench.Store, error) {
			return reach(ctx, s, ns, true)
		},
		Attach: func(ctx context.Context, s bench.Servers, ns string) (*bench.Store, error) {
			st, err := reach(ctx, s, ns, false)
			if err != nil {
				return nil, err
			}
			st.Close = nil // the opening process drops the tables
			return st, nil
		},
	}
}
