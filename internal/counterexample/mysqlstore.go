package counterexample

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"regexp"

	"github.com/jmoiron/sqlx"

	"github.com/stockguard/stockguard"
	"github.com/stockguard/stockguard/internal/errtext"
	"github.com/stockguard/stockguard/strategy"
)

// mysqlStock reads and writes a stock table of mysqllock's schema (sku,
// qty, …) with plain statements.
type mysqlStock struct {
	db                              *sqlx.DB
	setQuery, readQuery, writeQuery string
	table                           string
	overlap
}

// ForceOverlap makes the pattern's race certain: the first two requests on
// each SKU of this table, in any instance, are held between their read and
// their write until both have read. The harness's registrations force it;
// one request at a time, nothing changes but a wait of up to 10s.
func (s *mysqlStock) ForceOverlap() { s.force("mysql\x00" + s.table) }

var plainIdentifier = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]{0,47}$`)

func newMySQLStock(db *sqlx.DB, table string) (mysqlStock, error) {
	if !plainIdentifier.MatchString(table) {
		return mysqlStock{}, fmt.Errorf("%w: counterexample: table name %q is not a plain identifier", stockguard.ErrInvalidRequest, table)
	}
	t := "`" + table + "`"
	return mysqlStock{
		db:         db,
		table:      table,
		setQuery:   "INSERT INTO " + t + " (sku, qty) VALUES (?, ?) ON DUPLICATE KEY UPDATE qty = VALUES(qty)",
		readQuery:  "SELECT qty FROM " + t + " WHERE sku = ?",
		writeQuery: "UPDATE " + t + " SET qty = ? WHERE sku = ?",
	}, nil
}

// SetStock creates or overwrites sku's stock level.
func (s mysqlStock) SetStock(ctx context.Context, sku string, qty int64) error {
	if err := strategy.ValidateSet(sku, qty); err != nil {
		return err
	}
	if err := strategy.Canceled(ctx); err != nil {
		return err
	}
	if _, err := s.db.ExecContext(ctx, s.setQuery, sku, qty); err != nil {
		return fmt.Errorf("%w: set stock: %w", stockguard.ErrOutcomeUnknown, err)
	}
	return nil
}

// Stock returns sku's stock level, or ErrUnknownSKU.
func (s mysqlStock) Stock(ctx context.Context, sku string) (int64, error) {
	if err := strategy.ValidateSKU(sku); err != nil {
		return 0, err
	}
	if err := strategy.Canceled(ctx); err != nil {
		return 0, err
	}
	return s.read(ctx, s.db, sku)
}

// read SELECTs sku's level through q (the pool or a transaction).
func (s mysqlStock) read(ctx context.Context, q sqlx.QueryerContext, sku string) (int64, error) {
	var have int64
	err := q.QueryRowxContext(ctx, s.readQuery, sku).Scan(&have)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return 0, errtext.UnknownSKU(sku)
	case err != nil:
		if cerr := strategy.Canceled(ctx); cerr != nil {
			return 0, cerr
		}
		return 0, fmt.Errorf("%w: read: %w", stockguard.ErrContention, err)
	}
	return have, nil
}

// write UPDATEs sku's level to a value computed from an earlier read.
func (s mysqlStock) write(ctx context.Context, x sqlx.ExecerContext, sku string, level int64) error {
	if _, err := x.ExecContext(ctx, s.writeQuery, level, sku); err != nil {
		return fmt.Errorf("%w: write: %w", stockguard.ErrOutcomeUnknown, err)
	}
	return nil
}

func insufficient(sku string, have, qty int64) error {
	return errtext.Insufficient(sku, have, qty)
}
