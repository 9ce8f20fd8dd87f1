package pglock

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
//	SELECT epoch FROM fences WHERE name = $1 FOR SHARE
//
// and roll back, having changed nothing, when the number is not theirs;
// AdvanceFence's upsert of the row waits for those shared locks, so it
// returns only once every fenced transaction that read the old number has
// committed or rolled back. A fenced view's order of one line goes as one
// of several lines does (a transaction of a round trip per statement, not
// placeOne's pipeline): its SELECT must be answered before anything else
// of the transaction is sent.

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
	create string // name: the row at 0, unless it exists
}

func newFence(table, name string, epoch int64) *fence {
	t := quote(FencesTable(table))
	return &fence{
		name: name, epoch: epoch,
		lock:   "SELECT epoch FROM " + t + " WHERE name = $1 FOR SHARE",
		create: "INSERT INTO " + t + " (name, epoch) VALUES ($1, 0) ON CONFLICT DO NOTHING",
	}
}

// Fenced returns the view of a whose Take, Return and Order are a's, each
// write in a transaction that checks first that the fence name holds
// epoch: otherwise it changes nothing and returns an error wrapping
// strategy.ErrFenced. A name whose fence was never advanced holds 0. An
// invalid name (as an order ID is) makes every write fail with
// stockguard.ErrInvalidRequest.
func (a *Atomic) Fenced(name string, epoch int64) strategy.FencedOrders {
	return &Atomic{ledger: a.fencedLedger(name, epoch)}
}

// Fenced returns the view of b whose Take, Return and Order are b's,
// batched apart from b's own calls, each batch a transaction that checks
// first that the fence name holds epoch, as Atomic.Fenced says.
func (b *Batched) Fenced(name string, epoch int64) strategy.FencedOrders {
	return newBatchedLedger(b.fencedLedger(name, epoch), b.batchSize)
}

// AdvanceFence adds one to the fence name's number, once every fenced
// transaction in flight has ended (see strategy.Fencer), and returns the
// new number. It returns an error wrapping stockguard.ErrInvalidRequest
// (an invalid name, before any I/O), ErrUnavailable (no connection, no
// fence table: run CreateSchema), ErrContention (the row stayed busy past
// the lock timeout), ErrOutcomeUnknown, or the context's error.
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
	if err := strategy.ValidateID(name); err != nil {
		f.fenceInvalid = errtext.Wrap(err, "pglock: fence name")
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
		return l.pinned(ctx, l.session, func(conn *sqlx.Conn) error {
			err := conn.QueryRowxContext(ctx, "INSERT INTO "+t+" (name, epoch) VALUES ($1, 1) ON CONFLICT (name) DO UPDATE SET epoch = "+t+".epoch + 1 RETURNING epoch", name).Scan(&n)
			return classify(ctx, err, sent)
		})
	})
	return n, err
}

// fenced checks, first in tx, that l's fence holds its epoch, and keeps
// the fence's row locked for share until tx ends; an unfenced ledger
// checks nothing. A fence row not there yet is created at 0.
func (l *ledger) fenced(ctx context.Context, tx *sqlx.Tx) error {
	f := l.fence
	if f == nil {
		return nil
	}
	if l.fenceInvalid != nil {
		return l.fenceInvalid
	}
	var n int64
	err := tx.QueryRowxContext(ctx, f.lock, f.name).Scan(&n)
	if errors.Is(err, sql.ErrNoRows) {
		if _, err = tx.ExecContext(ctx, f.create, f.name); err == nil {
			err = tx.QueryRowxContext(ctx, f.lock, f.name).Scan(&n)
		}
	}
	if err != nil {
		return classify(ctx, err, unsent)
	}
	if n != f.epoch {
		return fmt.Errorf("%w (pglock: fence %q holds %d, this view writes under %d)", strategy.ErrFenced, f.name, n, f.epoch)
	}
	return nil
}
