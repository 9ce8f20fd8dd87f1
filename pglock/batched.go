package pglock

import (
	"context"
	"database/sql"
	"errors"
	"slices"

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

// Batched combines concurrent requests for one SKU into one write — flat
// combining, or client-side group commit. While a write for a SKU is in
// flight, further requests for it queue; when it returns, the whole queue
// (at most the batch size) goes out as the next write:
//
//	UPDATE stock SET qty = qty - total, version = version + 1 WHERE sku = $2 AND qty >= total RETURNING qty
//
// one autocommit statement, one round trip, however many buyers it serves.
// When the total does not fit, one transaction grants the requests in
// arrival order:
//
//	BEGIN
//	SELECT qty FROM stock WHERE sku = $1 FOR UPDATE
//	-- grant each request that still fits, refuse the others
//	UPDATE stock SET qty = qty - granted, version = version + 1 WHERE sku = $2
//	COMMIT
//
// A refused request never fits in what is left after the requests before
// it, and the requests after it only take more: no request is refused
// while stock remains for it, and a later, smaller request may still be
// granted after a larger one was refused. A batch that does not fit writes
// nothing with the UPDATE, so each batch changes the stock in exactly one
// transaction.
//
// Single-line Take and Hold orders of a SKU join its batches too (see
// Take): the batch's transaction records their orders and lines in the
// ledger, with one multi-row INSERT each, before the same conditional
// UPDATE of the total. Orders of several lines join one queue of their
// own, whatever their SKUs, and a batch of them is one transaction that
// locks their SKU rows in SKU order and grants or refuses each order whole,
// in arrival order.
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
	writes *combine.Combiner[request] // per SKU: Decrements and single-line orders
	orders *combine.Combiner[request] // one queue: orders of several lines
	// batchSize is WithBatchSize, for the combiners of a fenced view.
	batchSize int
}

var (
	_ stockguard.Inventory  = (*Batched)(nil)
	_ stockguard.Orders     = (*Batched)(nil)
	_ strategy.RetryCounter = (*Batched)(nil)
)

// NewBatched returns the combining strategy over db's table (options read:
// WithTable, WithBatchSize, WithLockTimeout, WithRetry). Each batch uses
// one pooled connection, which gets SET lock_timeout once
// (WithLockTimeout); don't change that setting on the same pool. The pool
// needs a connection per SKU being written at once, not per buyer.
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
	return newBatchedLedger(newLedger(db, o, lockTimeoutSession(o.lockWait)), o.batchSize)
}

// newBatchedLedger is a Batched over l, with combiners of its own.
func newBatchedLedger(l ledger, batchSize int) *Batched {
	b := &Batched{ledger: l, batchSize: batchSize}
	b.writes = combine.New(combine.Config[request]{
		Size:   batchSize,
		Write:  b.send,
		Answer: (*request).result,
		Apart:  orderID,
		Sealed: true,
	})
	b.orders = combine.New(combine.Config[request]{
		Size:   batchSize,
		Write:  b.sendOrders,
		Answer: (*request).result,
		Apart:  orderID,
		Sealed: true,
	})
	return b
}

// BatchStats counts what a Batched instance wrote.
type BatchStats struct {
	Batches  int64 // writes attempted, each one transaction
	Requests int64 // requests those writes carried

	OrderBatches  int64 // of Batches, the group commits of orders of several lines
	OrderRequests int64 // of Requests, the orders those carried
}

// Stats returns the counts since the instance was created;
// Requests/Batches is the mean batch size.
func (b *Batched) Stats() BatchStats {
	batches, requests := b.writes.Stats()
	ob, or := b.orders.Stats()
	return BatchStats{Batches: batches + ob, Requests: requests + or, OrderBatches: ob, OrderRequests: or}
}

// Retries returns how many times a request or batch was tried again:
// after a deadlock, after reclaiming expired holds, or after an ID of the
// batch turned out to be recorded already.
func (b *Batched) Retries() int64 { return b.retrier.Retries() }

// request is one Decrement, or one order, for a batch.
type request struct {
	qty     int64     // a Decrement's or single-line order's units
	order   *newOrder // the order; nil for a Decrement
	refused error     // set by the write that refused it
	settled bool      // answered from the ledger: its ID was recorded already
	answer  error     // a settled request's answer
}

// result is r's answer once the write carrying it returned err.
func (r *request) result(err error) error {
	switch {
	case r.settled:
		return r.answer
	case r.refused != nil:
		return r.refused
	}
	return err
}

// orderID keeps two orders with one ID out of one batch: the later one
// waits for the next batch, which answers it from the record the first
// one left.
func orderID(r *request) string {
	if r.order == nil {
		return ""
	}
	return r.order.id
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

// send writes bt's members, the requests of sku; see sendWith.
func (b *Batched) send(ctx context.Context, sku string, bt *combine.Batch[request]) error {
	return b.sendWith(ctx, bt, func(ctx context.Context, conn *sqlx.Conn, m []*request, seal func() bool) error {
		return b.apply(ctx, conn, sku, m, seal)
	})
}

// errLeft ends an attempt, before it sent a write, because a caller of
// the batch left: a request is never written after its caller left and
// was told so (see combine.Config.Sealed).
var errLeft = errors.New("pglock: a caller left before the batch's write was sent")

// sendWith writes bt's members with apply, claimed right before the first
// write (see combine.Batch.Members), retrying after a deadlock. An attempt
// works on copies of the members, so that a refusal by an attempt that then
// failed and was retried does not stick to a member; sendWith copies the
// outcome of the attempt that returned last. apply calls seal (Batch.Seal)
// before each write commits — in a transaction, right after the INSERT
// that records the members' orders, so that their IDs are locked from
// before a caller who leaves is answered ErrOutcomeUnknown until the
// outcome is known — and ends with errLeft when it reports false: the
// attempt, rolled back, is tried again at once without the callers who
// left.
func (b *Batched) sendWith(ctx context.Context, bt *combine.Batch[request], apply func(context.Context, *sqlx.Conn, []*request, func() bool) error) error {
	return b.retrier.Do(ctx, func(ctx context.Context) error {
		for {
			// Each errLeft drops a caller who left: Members shrinks.
			if err := b.attempt(ctx, bt, apply); !errors.Is(err, errLeft) {
				return err
			}
		}
	})
}

// attempt is one attempt of sendWith.
func (b *Batched) attempt(ctx context.Context, bt *combine.Batch[request], apply func(context.Context, *sqlx.Conn, []*request, func() bool) error) error {
	var of []*request
	var work []request
	for _, r := range bt.Members() {
		if !r.settled { // answered by an earlier attempt, for good
			of = append(of, r)
			work = append(work, request{qty: r.qty, order: r.order})
		}
	}
	if len(work) == 0 {
		return nil
	}
	m := make([]*request, len(work))
	for i := range work {
		m[i] = &work[i]
	}
	err := b.pinned(ctx, b.session, func(conn *sqlx.Conn) error {
		return apply(ctx, conn, m, bt.Seal)
	})
	for i, r := range of {
		r.refused, r.settled, r.answer = work[i].refused, work[i].settled, work[i].answer
	}
	return err
}

// apply writes the members' total with one conditional UPDATE and falls
// back to granting them one by one under the row lock when it does not
// fit. A member the fallback refuses gets its own error in refused. When
// members carry orders, they are recorded in the same transaction (see
// applyOrders).
func (b *Batched) apply(ctx context.Context, conn *sqlx.Conn, sku string, members []*request, seal func() bool) error {
	// Beyond MaxQty no stock level can hold the total: skip the UPDATE.
	total := total(members)
	if slices.ContainsFunc(members, func(r *request) bool { return r.order != nil }) {
		return b.applyOrders(ctx, conn, sku, members, total, seal)
	}
	if !seal() {
		return errLeft
	}
	if total <= stockguard.MaxQty {
		var left int64
		err := conn.QueryRowxContext(ctx, b.q.take, total, sku).Scan(&left)
		if !errors.Is(err, sql.ErrNoRows) {
			return classify(ctx, err, sent)
		}
	}
	return b.withReclaim(ctx, conn, one(sku), func(mayReclaim bool) error {
		return inTx(ctx, conn, nil, func(tx *sqlx.Tx) error {
			if !seal() {
				return errLeft
			}
			return b.grant(ctx, tx, sku, members, mayReclaim)
		})
	})
}

// grant locks the row and grants the members that fit, in arrival order,
// in tx. A member it refuses gets its own error in refused, which stands
// even if COMMIT fails: the write never included it. Before it refuses
// anyone, when mayReclaim, it looks for the SKU's expired holds and, if
// there are any, returns errReclaim: the caller rolls back, reclaims them in
// a transaction of its own and tries the batch again (see ledger.short for
// why not in this one), so that no request is refused while an expired
// hold has units for it.
func (b *Batched) grant(ctx context.Context, tx *sqlx.Tx, sku string, members []*request, mayReclaim bool) error {
	var have int64
	err := tx.QueryRowxContext(ctx, b.lq.lockLevel, sku).Scan(&have)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return unknownSKU(sku)
	case err != nil:
		return classify(ctx, err, unsent)
	}
	if total(members) > have && mayReclaim {
		var expired bool
		err = tx.QueryRowxContext(ctx, b.lq.hasExpired, sku).Scan(&expired)
		switch {
		case sqlstate(err) == sqlstateUndefinedTable: // no ledger, no holds
		case err != nil:
			return classify(ctx, err, unsent)
		case expired:
			return errReclaim
		}
	}
	var granted int64
	var refused, ok []*request
	for _, r := range members {
		if left := have - granted; r.qty > left {
			r.refused = insufficient(sku, r.qty, left)
			refused = append(refused, r)
		} else {
			granted += r.qty
			ok = append(ok, r)
		}
	}
	if granted == 0 {
		return errNothingGranted
	}
	// Commit what was granted, without the refused.
	if err := b.unrecord(ctx, tx, refused); err != nil {
		return err
	}
	// The granted orders' units go onto on_orders. A batch of Decrements
	// alone leaves the column be: it serves stock tables made before it.
	if ordered := onOrders(ok); ordered > 0 {
		_, err = tx.ExecContext(ctx, b.lq.takeGranted, granted, sku, ordered)
	} else {
		_, err = tx.ExecContext(ctx, b.q.takeHeld, granted, sku)
	}
	return classify(ctx, err, unsent)
}

// errReclaim rolls back a batch that found expired holds to reclaim.
var errReclaim = errors.New("pglock: expired holds to reclaim first")

// withReclaim runs write(true), a batch's transaction; when it asks for
// expired holds to be reclaimed, reclaims those of skus() (the SKUs it
// found short) in a transaction of its own and has the batch tried again,
// or, when another request reclaimed them meanwhile, runs write(false) at
// once.
func (b *Batched) withReclaim(ctx context.Context, conn *sqlx.Conn, skus func() []string, write func(mayReclaim bool) error) error {
	err := write(true)
	if !errors.Is(err, errReclaim) {
		return err
	}
	n := 0
	err = inTx(ctx, conn, nil, func(tx *sqlx.Tx) error {
		var err error
		n, err = b.reclaimIn(ctx, tx, skus()...)
		return err
	})
	switch {
	case err != nil:
		return err
	case n > 0:
		return strategy.Retry(errReclaimed)
	}
	return write(false)
}

// one returns sku as withReclaim's skus.
func one(sku string) func() []string { return func() []string { return []string{sku} } }

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
var errNothingGranted = errors.New("pglock: every request of the batch was refused")
