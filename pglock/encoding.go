package pglock

import (
	"context"
	"fmt"
	"sync/atomic"

	"github.com/jmoiron/sqlx"
	"github.com/stockguard/stockguard"
)

// encodingCheck finds out once per store that the pool's sessions speak
// UTF-8 (client_encoding), the encoding of Go strings. Under any other
// the server converts every SKU and order ID on its way in and out —
// SJIS, BIG5 and GBK map a UTF-8 string to another one, or refuse it — and
// pgx refuses the simple protocol (default_query_exec_mode=simple_protocol)
// only once a statement is on its way, which reads as an unknown outcome.
// The extended protocol binds arguments apart from the statement and the
// simple protocol doubles quotes under standard_conforming_strings, so
// neither lets a string run as SQL; the check is for answering right.
type encodingCheck struct {
	ok atomic.Bool
}

// verify returns nil once the pool's client_encoding was found to be
// UTF8, an error wrapping stockguard.ErrUnavailable when it is another,
// or the classified error of the read.
func (e *encodingCheck) verify(ctx context.Context, db *sqlx.DB) error {
	if e.ok.Load() {
		return nil
	}
	var enc string
	if err := db.GetContext(ctx, &enc, "SELECT current_setting('client_encoding')"); err != nil {
		return classify(ctx, err, unsent)
	}
	if enc != "UTF8" {
		return fmt.Errorf("%w: pglock: the pool's client_encoding is %s: SKUs and order IDs are UTF-8, so the DSN must leave client_encoding at UTF8", stockguard.ErrUnavailable, enc)
	}
	e.ok.Store(true)
	return nil
}
