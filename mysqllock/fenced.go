package mysqllock

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/jmoiron/sqlx"
	"github.com/stockguard/stockguard"
	"github.com/stockguard/stockguard/strategy"
)

// FencedStore is stock in a MySQL table written under an external lock
// that hands out fencing tokens (redislock's Lock.Token): each write carries
// the holder's token and is refused once a higher token has written the
// row, so a holder whose lock expired while it was paused cannot overwrite
// the write of the holder after it (Kleppmann's fencing). It is safe for
// concurrent use.
//
// The fence only ever grows: SetStock leaves it alone, so re-stocking a SKU
// does not let a stale holder write again. Rows are created by SetStock
// with fence 0, so any token ≥ 1 may write a fresh row.
type FencedStore struct {
	store
}

// NewFencedStore returns a FencedStore over db's table (options read:
// WithTable). See NewAtomic for the DSN settings that matter.
func NewFencedStore(db *sqlx.DB, opts ...Option) (*FencedStore, error) {
	o, err := build("NewFencedStore", db, readsStore, opts)
	if err != nil {
		return nil, err
	}
	return newFencedStore(db, o), nil
}

// newFencedStore builds what NewFencedStore returns, from valid options.
func newFencedStore(db *sqlx.DB, o options) *FencedStore {
	return &FencedStore{store: newStore(db, o)}
}

// WriteFenced sets sku's stock to qty (0…stockguard.MaxQty) on behalf of
// the holder of fencing token token (≥ 1):
//
//	UPDATE stock SET qty = ?, fence = ?, version = version + 1 WHERE sku = ? AND fence < ?
//
// It returns nil, or an error wrapping stockguard.ErrFenced (the row was written with a
// token ≥ token; it also satisfies stockguard.ErrContention; nothing
// changed), stockguard.ErrUnknownSKU, ErrInvalidRequest, ErrUnavailable
// (the server refused, or no connection: nothing changed), ErrOutcomeUnknown
// (the connection failed after the UPDATE was sent) or the context's error
// (nothing sent).
func (f *FencedStore) WriteFenced(ctx context.Context, sku string, qty, token int64) error {
	invalid := strategy.ValidateSet(sku, qty)
	if invalid == nil && token < 1 {
		invalid = fmt.Errorf("%w: fencing token %d, want ≥ 1", stockguard.ErrInvalidRequest, token)
	}
	if err := f.check(ctx, invalid); err != nil {
		return err
	}
	conn, err := f.conn(ctx)
	if err != nil {
		return err
	}
	defer conn.Close()
	res, err := execBound(ctx, conn, f.q.fenced, qty, token, sku, token)
	if err != nil {
		return classify(ctx, err, sent)
	}
	// A match always changes the fence, so rows matched equals rows changed,
	// with or without clientFoundRows.
	n, err := res.RowsAffected()
	if err != nil || n == 1 {
		return classify(ctx, err, sent)
	}
	// Fences never go down and rows are never deleted: a row with fence ≥
	// token refuses the write now, whenever it got there. A row with a lower
	// fence would have matched, so it was created after the UPDATE, which
	// found no row.
	var fence int64
	err = rowBound(ctx, conn, f.q.readFence, sku).Scan(&fence)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return unknownSKU(sku)
	case err != nil:
		return classify(ctx, err, unsent)
	case fence < token:
		return unknownSKU(sku)
	}
	return fmt.Errorf("%w: %q carries token %d, the write had %d", stockguard.ErrFenced, sku, fence, token)
}
