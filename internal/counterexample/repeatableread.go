package counterexample

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/jmoiron/sqlx"

	"github.com/stockguard/stockguard"
	"github.com/stockguard/stockguard/strategy"
)

// RepeatableRead reads the stock and writes the computed new level inside
// one transaction at MySQL's default isolation, REPEATABLE READ — the
// isolation level that makes plain reads inside locks go stale — trusting
// the transaction to protect the read-modify-write.
//
// How it breaks: under REPEATABLE READ a plain SELECT reads a snapshot and
// locks nothing. Two transactions read the same level; the second UPDATE
// waits for the first transaction's row lock, then overwrites its result
// with the level computed from the stale snapshot: a lost update, reported
// as oversold. (SELECT … FOR UPDATE, or UPDATE … SET qty = qty − ?, would
// have been correct.)
type RepeatableRead struct {
	mysqlStock
}

var _ stockguard.Inventory = (*RepeatableRead)(nil)

// NewRepeatableRead uses the stock table of mysqllock's schema called
// table. It returns an error wrapping ErrInvalidRequest when table is not a
// plain identifier.
func NewRepeatableRead(db *sqlx.DB, table string) (*RepeatableRead, error) {
	s, err := newMySQLStock(db, table)
	if err != nil {
		return nil, err
	}
	return &RepeatableRead{mysqlStock: s}, nil
}

// Decrement runs BEGIN; SELECT qty; check; UPDATE qty = computed; COMMIT.
func (r *RepeatableRead) Decrement(ctx context.Context, sku string, qty int64) error {
	if err := admit(ctx, sku, qty); err != nil {
		return err
	}
	tx, err := r.db.BeginTxx(ctx, &sql.TxOptions{Isolation: sql.LevelRepeatableRead})
	if err != nil {
		if cerr := strategy.Canceled(ctx); cerr != nil {
			return cerr
		}
		return fmt.Errorf("%w: begin: %w", stockguard.ErrContention, err)
	}
	defer tx.Rollback()
	have, err := r.read(ctx, tx, sku)
	if err != nil {
		return err
	}
	if have < qty {
		return insufficient(sku, have, qty)
	}
	r.meet(ctx, "read", sku)
	if err := r.write(ctx, tx, sku, have-qty); err != nil {
		return err
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("%w: commit: %w", stockguard.ErrOutcomeUnknown, err)
	}
	return nil
}
