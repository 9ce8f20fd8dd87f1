package mysqllock

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/jmoiron/sqlx"

	"github.com/stockguard/stockguard/internal/errtext"
	"github.com/stockguard/stockguard/strategy"
)

// Fences in the back (strategy.Fencer). The fence table (FencesTable,
// made by CreateSchema) holds one row per fence name and its epoch
// number. A fenced view's transactions (Take, Hold, Confirm, Return)
// begin with
//
//	SELECT epoch FROM fences WHERE name = ? LOCK IN SHARE MODE
//
// and roll back, having changed nothing, when the number is not theirs;
// AdvanceFence's UPDATE of the row waits for those shared locks, so it
// returns only once every fenced transaction that read the old number has
// committed or rolled back. A fenced view sends statement by statement
// (no multi-statement round trips): its SELECT must be answered before
// anything else of the transaction is sent.

// FencesTable returns the name of the fence table for the stock table
// table: table + "_fences".
func FencesTable(table string) string { return table + "_fences" }

var (
	_ strategy.Fencer = (*Atomic)(nil)
	_ strategy.Fencer = (*Batched)(nil)
)

// fence is the fence a view's transactions check: its name and the epoch
// they write under.
type fence struct {
	name   string
	epoch  int64
	lock   string // name → epoch, under a shared lock
	tidb   string // lock's statement on TiDB: an exclusive lock
	create string // name: the row at 0, unless it exists
}

func newFence(table, name string, epoch int64) *fence {
	t := quote(FencesTable(table))
	return &fence{
		name: name, epoch: epoch,
		lock:   "SELECT epoch FROM " + t + " WHERE name = ? LOCK IN SHARE MODE",
		tidb:   "SELECT epoch FROM " + t + " WHERE name = ? FOR UPDATE",
		create: "INSERT IGNORE INTO " + t + " (name, epoch) VALUES (?, 0)",
	}
}

// Fenced returns the view of a whose Take, Return and Order are a's, each
// write in a transaction that checks first that the fence name holds
// epoch: otherwise it changes nothing and returns an error wrapping
// strategy.ErrFenced. A name whose fence was never advanced holds 0. An
// invalid name (as an order ID is) makes every call fail with
// stockguard.ErrInvalidRequest.
func (a *Atomic) Fenced(name string, epoch int64) strategy.FencedOrders {
	return &Atomic{ledger: a.fencedLedger(name, epoch)}
}

// Fenced returns the view of b whose Take, Return and Order are b's,
// batched apart from b's own calls, each batch a transaction that checks
// first that the fence name holds epoch, as Atomic.Fenced says.
func (b *Batched) Fenced(name string, epoch int64) strategy.FencedOrders {
	return newBatchedLedger(b.fencedLedger(name, epoch), b.batchSize, len(b.lanes))
}

// AdvanceFence adds one to the fence name's number, once every fenced
// transaction in flight has ended (see strategy.Fencer), and returns the
// new number. It returns an error wrapping stockguard.ErrInvalidRequest
// (an invalid name, before any I/O), ErrUnavailable (no connection, no
// fence table: run CreateSchema), ErrContention (the row stayed busy past
// the lock wait timeout), ErrOutcomeUnknown, or the context's error.
func (a *Atomic) AdvanceFence(ctx context.Context, name string) (int64, error) {
	return a.advanceFence(ctx, name)
}

// AdvanceFence is Atomic.AdvanceFence.
func (b *Batched) AdvanceFence(ctx context.Context, name string) (int64, error) {
	return b.advanceFence(ctx, name)
}

// fencedLedger is l whose write transactions check the fence name at
// epoch.
func (l *ledger) fencedLedger(name string, epoch int64) ledger {
	f := *l
	f.fence = newFence(l.table, name, epoch)
	if err := strategy.ValidateID(name); err != nil && f.refused == nil {
		f.refused = errtext.Wrap(err, "mysqllock: fence name")
	}
	return f
}

func (l *ledger) advanceFence(ctx context.Context, name string) (int64, error) {
	if err := l.check(ctx, strategy.ValidateID(name)); err != nil {
		return 0, err
	}
	t := quote(FencesTable(l.table))
	var n int64
	err := l.retrier.Do(ctx, func(ctx context.Context) error {
		return l.pinned(ctx, l.session, func(ctx context.Context, conn *sqlx.Conn) error {
			return inTx(ctx, conn, func(tx *sqlx.Tx) error {
				if _, err := execBound(ctx, tx, "INSERT INTO "+t+" (name, epoch) VALUES (?, 1) ON DUPLICATE KEY UPDATE epoch = epoch + 1", name); err != nil {
					return classify(ctx, err, unsent)
				}
				return classify(ctx, get(ctx, tx, "SELECT epoch FROM "+t+" WHERE name = ?", []any{name}, &n), unsent)
			})
		})
	})
	return n, err
}

// fenced checks, first in tx, that l's fence holds its epoch, and keeps
// the fence's row locked in share mode until tx ends; an unfenced ledger
// checks nothing. A fence row not there yet is created at 0.
func (l *ledger) fenced(ctx context.Context, tx *sqlx.Tx) error {
	f := l.fence
	if f == nil {
		return nil
	}
	// TiDB takes no shared row lock (LOCK IN SHARE MODE is refused, or a
	// no-op under tidb_enable_noop_functions): there the fenced
	// transactions of a name take its row in turn, which still makes
	// AdvanceFence wait for each.
	lock := f.lock
	if l.engine.known() == EngineTiDB {
		lock = f.tidb
	}
	var n int64
	err := get(ctx, tx, lock, []any{f.name}, &n)
	if errors.Is(err, sql.ErrNoRows) {
		if _, err = execBound(ctx, tx, f.create, f.name); err == nil {
			err = get(ctx, tx, lock, []any{f.name}, &n)
		}
	}
	if err != nil {
		return classify(ctx, err, unsent)
	}
	if n != f.epoch {
		return fmt.Errorf("%w (mysqllock: fence %q holds %d, this view writes under %d)", strategy.ErrFenced, f.name, n, f.epoch)
	}
	return nil
}

// multiStatements reports whether l's transactions may send several
// statements in one round trip on conn: never for a fenced view, whose
// fence check must be answered before anything else is sent.
func (l *ledger) multiStatements(ctx context.Context, conn *sqlx.Conn) (bool, error) {
	if l.fence != nil {
		return false, nil
	}
	return l.multi.check(ctx, conn, l.engine.known())
}
