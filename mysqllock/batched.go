package mysqllock

import (
	"context"
	"database/sql"
	"errors"
	"strconv"
	"sync/atomic"

	"github.com/jmoiron/sqlx"
	"github.com/stockguard/stockguard"
	"github.com/stockguard/stockguard/internal/combine"
	"github.com/stockguard/stockguard/strategy"
)

// DefaultBatchSize is NewBatched's default bound on the requests one
// transaction carries.
const DefaultBatchSize = 64

// WithBatchSize bounds how many queued requests of one SKU NewBatched
// combines into one transaction, 1–10000; the rest wait for the next one.
// The cost of the common path does not grow with the batch, so the bound
// mostly limits how many buyers one lost COMMIT leaves with
// ErrOutcomeUnknown. Default DefaultBatchSize (64).
func WithBatchSize(n int) Option {
	return func(o *options) {
		o.given |= optBatchSize
		if o.within("batch size", n, 1, 10_000) {
			o.batchSize = n
		}
	}
}

// DefaultOrderLanes is NewBatched's default number of order batches one
// instance has in flight at once.
const DefaultOrderLanes = 1

// WithOrderLanes sets how many order batches (see Take) one NewBatched
// instance writes at once, 1–64: an order call joins the lane its ID
// hashes to, so calls with one ID always share a lane. More lanes overlap
// one batch's round trips and COMMIT with another's; batches of different
// lanes that share SKUs queue on those rows, in SKU order, never
// deadlocking. But each lane's batches are smaller and each batch costs
// the same fixed COMMIT, and a batch that reads under locks holds its
// rows from its read to its COMMIT: on one hot SKU and on a zipf checkout
// over 1000 SKUs 4 lanes measured slower than 1. Default
// DefaultOrderLanes (1).
func WithOrderLanes(n int) Option {
	return func(o *options) {
		o.given |= optOrderLanes
		if o.within("order lanes", n, 1, 64) {
			o.orderLanes = n
		}
	}
}

// Batched combines concurrent requests for one SKU into one write — flat
// combining, or client-side group commit. While a write for a SKU is in
// flight, further requests for it queue; when it returns, the whole queue
// (at most the batch size) goes out as the next write:
//
//	UPDATE stock SET qty = qty - total, version = version + 1 WHERE sku = ? AND qty >= total
//
// one autocommit statement, one round trip, however many buyers it serves.
// When the total does not fit, one transaction grants the requests in
// arrival order:
//
//	BEGIN
//	SELECT qty FROM stock WHERE sku = ? FOR UPDATE
//	-- grant each request that still fits, refuse the others
//	UPDATE stock SET qty = qty - granted, version = version + 1 WHERE sku = ?
//	COMMIT
//
// A refused request never fits in what is left after the requests before
// it, and the requests after it only take more: no request is refused
// while stock remains for it, and a later, smaller request may still be
// granted after a larger one was refused. A batch that does not fit writes
// nothing with the UPDATE, so each batch changes the stock in exactly one
// transaction.
//
// Orders (Take, Hold, Confirm, Return) are group-committed too, across
// SKUs: every order call of the instance joins one queue, and a batch of
// carts from many buyers is one transaction.
//
// Nothing waits to fill a batch: a request that finds its SKU idle goes
// out alone at once, and batches grow only as long as the writes take. So
// a hot SKU's throughput scales with the batch size while a request waits
// for the write in flight and its own — more only when over a batch size
// of requests is queued ahead of it.
//
// Batching happens within one instance; correctness rests on the database
// alone (the conditional UPDATE and the row lock), so any number of
// instances, in any number of processes, may share the table, also with
// the package's other strategies. Batched is safe for concurrent use; share
// one instance per process, or it has nothing to combine.
type Batched struct {
	ledger
	writes *combine.Combiner[request]   // Decrements, per SKU
	orders *combine.Combiner[orderCall] // order calls, one queue per lane
	reads  *combine.Combiner[orderRead] // Order calls, one queue
	lanes  []string                     // the order queues' keys
	short  *shortSKUs                   // SKUs a batch lately refused an order on
	packet *atomic.Int64                // the server's max_allowed_packet once read; 0 until then
	// batchSize is WithBatchSize, for the combiners of a fenced view.
	batchSize int
}

var (
	_ stockguard.Inventory  = (*Batched)(nil)
	_ stockguard.Orders     = (*Batched)(nil)
	_ strategy.RetryCounter = (*Batched)(nil)
)

// NewBatched returns the combining strategy over db's table (options read:
// WithTable, WithBatchSize, WithOrderLanes, WithLockWaitTimeout, WithRetry). Each batch
// uses one pooled connection, which gets SET SESSION
// innodb_lock_wait_timeout once (WithLockWaitTimeout); don't change that
// variable on the same pool. See NewAtomic for the DSN settings that
// matter; the pool needs a connection per SKU being written at once, not
// per buyer.
func NewBatched(db *sqlx.DB, opts ...Option) (*Batched, error) {
	o, err := build("NewBatched", db, readsBatched, opts)
	if err != nil {
		return nil, err
	}
	return newBatched(db, o), nil
}

// newBatched builds what NewBatched returns, from valid options.
func newBatched(db *sqlx.DB, o options) *Batched {
	o.mode = LockWait // the fallback must see every row, not skip or refuse a busy one
	return newBatchedLedger(newLedger(db, o, lockWaitSession(o.lockWait)), o.batchSize, o.orderLanes)
}

// newBatchedLedger is a Batched over l, with combiners of its own.
func newBatchedLedger(l ledger, batchSize, orderLanes int) *Batched {
	b := &Batched{ledger: l, batchSize: batchSize}
	b.writes = combine.New(combine.Config[request]{
		Size:   batchSize,
		Write:  b.send,
		Answer: (*request).result,
	})
	b.orders = newOrderCombiner(b, batchSize)
	b.reads = combine.New(combine.Config[orderRead]{Size: batchSize, Write: b.readOrders, Answer: (*orderRead).result})
	b.short = newShortSKUs()
	b.packet = new(atomic.Int64)
	for i := range orderLanes {
		b.lanes = append(b.lanes, orderQueue+strconv.Itoa(i))
	}
	return b
}

// BatchStats counts what a Batched instance wrote.
type BatchStats struct {
	Batches  int64 // Decrement writes attempted, each one transaction
	Requests int64 // Decrements those writes carried
	// OrderBatches and OrderCalls count the same for order calls (Take,
	// Hold, Confirm, Return): OrderCalls/OrderBatches is the mean number of
	// order calls per COMMIT.
	OrderBatches int64
	OrderCalls   int64
}

// Stats returns the counts since the instance was created;
// Requests/Batches is the mean batch size.
func (b *Batched) Stats() BatchStats {
	batches, requests := b.writes.Stats()
	obatches, calls := b.orders.Stats()
	return BatchStats{Batches: batches, Requests: requests, OrderBatches: obatches, OrderCalls: calls}
}

// Retries returns how many times a request or batch was tried again:
// after a deadlock, after reclaiming expired holds, or after an ID of the
// batch turned out to be recorded already.
func (b *Batched) Retries() int64 { return b.retrier.Retries() }

// request is one Decrement for a batch.
type request struct {
	qty     int64
	refused error // set by the write that refused it
}

// result is r's answer once the write carrying it returned err.
func (r *request) result(err error) error {
	if r.refused != nil {
		return r.refused
	}
	return err
}

// Decrement takes qty units of sku, all or none, in a batch with the other
// requests for sku. It returns nil or an error wrapping one of
// stockguard.ErrInsufficientStock, ErrUnknownSKU, ErrInvalidRequest,
// ErrContention (the row stayed busy past the lock-wait timeout, or
// deadlock retries ran out: nothing changed), ErrUnavailable (the server
// refused, or no connection: nothing changed),
// ErrOutcomeUnknown (the batch's write was sent but its reply was lost,
// or ctx ended once a write carried the request), or the context's error
// (ctx ended before any write carried the request: it was dropped and
// nothing changed). A request the fallback refused is answered
// ErrInsufficientStock even when the batch's COMMIT fails, because the
// write never included it.
func (b *Batched) Decrement(ctx context.Context, sku string, qty int64) error {
	if err := b.check(ctx, strategy.Validate(sku, qty)); err != nil {
		return err
	}
	return b.writes.Do(ctx, sku, request{qty: qty})
}

// send writes bt's members, claimed right before the first write (see
// combine.Batch.Members), retrying after a deadlock.
//
// An attempt works on copies of the members and publishes them when it
// returns; send copies their outcome back only from an attempt that
// returned to it. A request written alone is supervised on its caller's
// context: an attempt whose context ended goes on in a goroutine of its
// own after send was answered (see supervise), and its late refusals must
// not race with — or change — the answers already given. A drainer's
// batch has no caller to answer early and runs in place (pinnedInPlace).
func (b *Batched) send(ctx context.Context, sku string, bt *combine.Batch[request]) error {
	pinned := b.pinned
	if bt.Queued() {
		pinned = b.pinnedInPlace
	}
	return b.retrier.Do(ctx, func(ctx context.Context) error {
		var done atomic.Pointer[attempt]
		err := pinned(ctx, b.session, func(ctx context.Context, conn *sqlx.Conn) error {
			of := bt.Members()
			a := attempt{of: of, work: make([]request, len(of))}
			m := make([]*request, len(of))
			for i, r := range of {
				a.work[i].qty = r.qty
				m[i] = &a.work[i]
			}
			err := b.apply(ctx, conn, sku, m)
			done.Store(&a)
			return err
		})
		if a := done.Load(); a != nil {
			for i, r := range a.of {
				r.refused = a.work[i].refused
			}
		}
		return err
	})
}

// attempt is one attempt of send: the members it carried and the copies
// it wrote their outcome to.
type attempt struct {
	of   []*request
	work []request
}

// apply writes the members' total with one conditional UPDATE and falls
// back to granting them one by one under the row lock when it does not
// fit. A member the fallback refuses gets its own error in refused.
func (b *Batched) apply(ctx context.Context, conn *sqlx.Conn, sku string, members []*request) error {
	// Beyond MaxQty no stock level can hold the total: skip the UPDATE.
	total := total(members)
	if total <= stockguard.MaxQty {
		res, err := exec(ctx, conn, b.q.take, total, sku, total)
		if err != nil {
			return classify(ctx, err, sent)
		}
		// Rows matched equals rows changed (see Atomic.take).
		if n, err := res.RowsAffected(); err != nil || n == 1 {
			return classify(ctx, err, sent)
		}
	}
	return inTx(ctx, conn, func(tx *sqlx.Tx) error {
		return b.grant(ctx, tx, sku, members)
	})
}

// grant locks the row and grants the members that fit, in arrival order,
// in tx. A member it refuses gets its own error in refused, which stands
// even if COMMIT fails: the write never included it. Before it refuses
// anyone it reclaims the SKU's expired holds (see reclaimIn), in tx, so
// that no request is refused while an expired hold has units for it.
func (b *Batched) grant(ctx context.Context, tx *sqlx.Tx, sku string, members []*request) error {
	var have int64
	reclaimed, checked := 0, false
	for {
		err := rowBound(ctx, tx, b.lq.lockLevel, sku).Scan(&have)
		switch {
		case errors.Is(err, sql.ErrNoRows):
			return unknownSKU(sku)
		case err != nil:
			return classify(ctx, err, unsent)
		}
		if total(members) <= have || checked {
			break
		}
		checked = true
		var expired bool
		err = rowBound(ctx, tx, b.lq.hasExpired, sku).Scan(&expired)
		switch {
		case isServerError(err, erNoSuchTable): // no ledger, no holds
		case err != nil:
			return classify(ctx, err, unsent)
		case expired:
			if reclaimed, err = b.reclaimIn(ctx, tx, sku); err != nil {
				return err
			}
		}
		if reclaimed == 0 {
			break
		}
	}
	var granted int64
	for _, r := range members {
		if left := have - granted; r.qty > left {
			r.refused = insufficient(sku, r.qty, left)
		} else {
			granted += r.qty
		}
	}
	if granted == 0 && reclaimed == 0 {
		return errNothingGranted
	}
	// Commit what was granted and reclaimed, without the refused.
	if granted == 0 {
		return nil
	}
	_, err := execBound(ctx, tx, b.q.takeHeld, granted, sku)
	return classify(ctx, err, unsent)
}

// total is the units members ask for, at most MaxQty + 1.
func total(members []*request) int64 {
	var t int64
	for _, r := range members {
		t = min(t+r.qty, stockguard.MaxQty+1)
	}
	return t
}

// errNothingGranted rolls back a batch that refused every member; each
// gets its own refusal.
var errNothingGranted = errors.New("mysqllock: every request of the batch was refused")
