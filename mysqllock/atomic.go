package mysqllock

import (
	"cmp"
	"context"
	"errors"

	"github.com/jmoiron/sqlx"
	"github.com/stockguard/stockguard"
	"github.com/stockguard/stockguard/strategy"
)

// Atomic decrements with one conditional statement,
//
//	UPDATE stock SET qty = qty - ?, version = version + 1 WHERE sku = ? AND qty >= ?
//
// which checks and writes under the row lock the UPDATE takes anyway: the
// fastest MySQL strategy, one round trip. It is safe for concurrent use and
// with other instances, and with the other strategies of this package on
// the same table.
//
// Atomic also implements stockguard.Orders: each Take, Hold, Confirm,
// Return or Restock is one transaction over the stock table and the order
// ledger (see CreateSchema), which records the order and its lines with
// the stock they took; a repeated call is answered from the record.
type Atomic struct {
	ledger
}

var (
	_ stockguard.Inventory  = (*Atomic)(nil)
	_ stockguard.Orders     = (*Atomic)(nil)
	_ strategy.RetryCounter = (*Atomic)(nil)
)

// NewAtomic returns the conditional-UPDATE strategy over db's table
// (options read: WithTable, WithRetry, WithEngine). On TiDB the UPDATE
// runs in a pessimistic transaction (see EngineTiDB).
//
// DSN recommendations, for every strategy of this package: set
// interpolateParams=true — without it the driver prepares, executes and
// closes a server-side statement per call, two round trips instead of one
// (the package benchmarks measure the difference); and let the pool hold at
// least as many connections as there are concurrent callers
// (db.SetMaxOpenConns, db.SetMaxIdleConns), or requests queue for a
// connection and new ones are dialled per request. The package works with
// any value of clientFoundRows.
//
// A context that ends while the UPDATE waits for a busy row closes the
// socket, but the server goes on waiting and applies the UPDATE when it
// gets the row: the request reports ErrOutcomeUnknown. To bound that wait on
// the server too, put innodb_lock_wait_timeout=N (seconds) in the DSN; the
// driver sets it on every connection.
func NewAtomic(db *sqlx.DB, opts ...Option) (*Atomic, error) {
	o, err := build("NewAtomic", db, readsAtomic, opts)
	if err != nil {
		return nil, err
	}
	return newAtomic(db, o), nil
}

// newAtomic builds what NewAtomic returns, from valid options.
func newAtomic(db *sqlx.DB, o options) *Atomic {
	return &Atomic{ledger: newLedger(db, o, nil)}
}

// Retries returns how many times a request was tried again: after a
// deadlock, or when the row changed between a refused UPDATE and the read
// that explains it.
func (a *Atomic) Retries() int64 { return a.retrier.Retries() }

// Decrement takes qty units of sku, all or none. It returns nil or an error
// wrapping one of stockguard.ErrInsufficientStock, ErrUnknownSKU,
// ErrInvalidRequest, ErrContention (retries exhausted or the row stayed
// busy: nothing changed), ErrUnavailable (the server refused, or no
// connection: nothing changed), ErrOutcomeUnknown (the connection failed
// after the UPDATE was sent), or the context's error (nothing sent).
func (a *Atomic) Decrement(ctx context.Context, sku string, qty int64) error {
	if err := a.check(ctx, strategy.Validate(sku, qty)); err != nil {
		return err
	}
	return a.retrier.Do(ctx, func(ctx context.Context) error {
		return a.pinned(ctx, nil, func(ctx context.Context, conn *sqlx.Conn) error {
			return a.take(ctx, conn, sku, qty)
		})
	})
}

var errChanged = errors.New("mysqllock: a row changed between a read and the write that relied on it")

func (a *Atomic) take(ctx context.Context, conn *sqlx.Conn, sku string, qty int64) error {
	if a.engine.known() == EngineTiDB {
		return a.takeInTx(ctx, conn, sku, qty)
	}
	res, err := exec(ctx, conn, a.q.take, qty, sku, qty)
	if err != nil {
		return classify(ctx, err, sent)
	}
	// Rows matched equals rows changed here (qty ≥ 1 and version always
	// moves), so the count means the same with or without clientFoundRows.
	n, err := res.RowsAffected()
	if err != nil || n == 1 {
		return classify(ctx, err, sent)
	}
	// Nothing changed. A second read cannot tell why the UPDATE refused —
	// the row may have been created or re-stocked since — but what it sees
	// is itself a valid answer, taken at the moment of the read: no row
	// (rows are never deleted, so there was none at the UPDATE either) is
	// an unknown SKU; too few units is insufficient stock, once no expired
	// hold has units to give back. Only a row that now has enough stock
	// contradicts the refusal, and then the request, which changed nothing,
	// is simply tried again.
	return a.short(ctx, conn, nil, []stockguard.Line{{SKU: sku, Qty: qty}})
}

var errRefused = errors.New("mysqllock: the UPDATE changed no row")

// takeInTx is take for TiDB: the same UPDATE in a pessimistic transaction
// (see EngineTiDB). Autocommit, TiDB would run it optimistically: on a hot
// row most concurrent UPDATEs then conflict at commit and are retried,
// while inside a pessimistic transaction they queue on the row lock as on
// InnoDB — two more round trips (BEGIN, COMMIT), no conflicts. A refusal
// rolls back and is explained as take explains it.
func (a *Atomic) takeInTx(ctx context.Context, conn *sqlx.Conn, sku string, qty int64) error {
	err := inTx(ctx, conn, func(tx *sqlx.Tx) error {
		res, err := exec(ctx, tx, a.q.take, qty, sku, qty)
		if err != nil {
			return classify(ctx, err, unsent)
		}
		if n, err := res.RowsAffected(); err != nil || n != 1 {
			return cmp.Or(classify(ctx, err, unsent), errRefused)
		}
		return nil
	})
	if errors.Is(err, errRefused) {
		return a.short(ctx, conn, nil, []stockguard.Line{{SKU: sku, Qty: qty}})
	}
	return err
}
