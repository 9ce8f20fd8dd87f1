package mysqllock

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/jmoiron/sqlx"
	"github.com/stockguard/stockguard"
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
// Single-line Take and Hold orders of a SKU join its batches too (see
// Take): the batch's transaction records their orders and lines in the
// ledger, with one multi-row INSERT each, before the same conditional
// UPDATE of the total; multi-line orders go through Atomic's one
// transaction per order.
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
	size int

	mu     sync.Mutex
	queues map[string]*queue // SKUs being written; removed when idle

	batches  atomic.Int64
	requests atomic.Int64
}

var (
	_ stockguard.Inventory    = (*Batched)(nil)
	_ stockguard.Orders       = (*Batched)(nil)
	_ stockguard.RetryCounter = (*Batched)(nil)
)

// NewBatched returns the combining strategy over db's table (options read:
// WithTable, WithBatchSize, WithLockWaitTimeout, WithRetry). Each batch
// uses one pooled connection, which gets SET SESSION
// innodb_lock_wait_timeout once (WithLockWaitTimeout); don't change that
// variable on the same pool. See NewAtomic for the DSN settings that
// matter; the pool needs a connection per SKU being written at once, not
// per buyer.
func NewBatched(db *sqlx.DB, opts ...Option) *Batched {
	o := newOptions(opts)
	o.mode = LockWait // the fallback must see every row, not skip or refuse a busy one
	return &Batched{
		ledger: newLedger(db, o, lockWaitSession(o.lockWait)),
		size:   o.batchSize,
		queues: map[string]*queue{},
	}
}

// BatchStats counts what a Batched instance wrote.
type BatchStats struct {
	Batches  int64 // writes attempted, each one transaction
	Requests int64 // requests those writes carried
}

// Stats returns the counts since the instance was created;
// Requests/Batches is the mean batch size.
func (b *Batched) Stats() BatchStats {
	return BatchStats{Batches: b.batches.Load(), Requests: b.requests.Load()}
}

// Retries returns how many times a request or batch was tried again:
// after a deadlock, after reclaiming expired holds, or after an ID of the
// batch turned out to be recorded already.
func (b *Batched) Retries() int64 { return b.retrier.Retries() }

// A request's state: waiting in a queue or a batch not yet written,
// claimed by a write (its outcome now depends on the database), or
// abandoned by its caller before any write carried it.
const (
	waiting int32 = iota
	claimed
	abandoned
)

type request struct {
	qty     int64
	order   *newOrder // a single-line order; nil for a Decrement
	state   atomic.Int32
	batch   *batch // set, under Batched.mu, when a drainer takes the request
	refused error  // set by the write that refused it
	settled bool   // answered from the ledger: its ID was recorded already
	answer  error  // a settled request's answer
	done    chan error
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

// queue holds one SKU's requests in arrival order.
type queue struct{ pending []*request }

// batch is one write in flight. Its statements run under a context of
// their own, not any caller's: one buyer giving up must not abort the
// others' write. The context ends only when every member has stopped
// waiting for it.
type batch struct {
	ctx    context.Context
	cancel context.CancelFunc
	live   atomic.Int64 // members still waiting
}

func (bt *batch) leave() {
	if bt.live.Add(-1) == 0 {
		bt.cancel()
	}
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
	if err := b.check(ctx, stockguard.Validate(sku, qty)); err != nil {
		return err
	}
	return b.submit(ctx, sku, &request{qty: qty})
}

// submit has r written in a batch of sku's requests and returns its
// answer.
func (b *Batched) submit(ctx context.Context, sku string, r *request) error {
	b.mu.Lock()
	q, busy := b.queues[sku]
	if !busy {
		// Nobody writes sku: write alone, at once, on the caller's
		// goroutine and context, as NewAtomic would; requests arriving
		// meanwhile queue, and a drainer takes over from here.
		q = &queue{}
		b.queues[sku] = q
		b.mu.Unlock()
		return b.alone(ctx, sku, q, r)
	}
	r.done = make(chan error, 1)
	q.pending = append(q.pending, r)
	b.mu.Unlock()
	select {
	case err := <-r.done:
		return err
	case <-ctx.Done():
		return b.abandon(ctx, r)
	}
}

// alone writes r by itself, then hands q over to a drainer if requests
// queued meanwhile, else removes it.
func (b *Batched) alone(ctx context.Context, sku string, q *queue, r *request) error {
	defer func() {
		b.mu.Lock()
		defer b.mu.Unlock()
		if len(q.pending) > 0 {
			go b.drain(sku, q)
		} else {
			delete(b.queues, sku)
		}
	}()
	one := []*request{r}
	err := b.send(ctx, sku, func() []*request { return one })
	b.count(1)
	return r.result(err)
}

// abandon answers a request whose context ended before its result came.
func (b *Batched) abandon(ctx context.Context, r *request) error {
	b.mu.Lock()
	left := r.state.CompareAndSwap(waiting, abandoned)
	bt := r.batch
	b.mu.Unlock()
	if left {
		// Still queued, or taken but not yet claimed: no write will carry it.
		if bt != nil {
			bt.leave()
		}
		return stockguard.Canceled(ctx)
	}
	select {
	case err := <-r.done:
		return err
	default:
	}
	bt.leave()
	return fmt.Errorf("%w: the context ended (%v) while the batch carrying the request was being written", stockguard.ErrOutcomeUnknown, ctx.Err())
}

// drain writes sku's queue batch after batch until it finds it empty, then
// removes it, so that idle SKUs cost no memory. A request that wrote alone
// starts it when others queued meanwhile: one drainer per busy SKU.
func (b *Batched) drain(sku string, q *queue) {
	var reqs []*request
	for {
		bt := &batch{}
		bt.ctx, bt.cancel = context.WithCancel(context.Background())
		b.mu.Lock()
		reqs = b.take(q, reqs[:0], bt)
		if len(reqs) == 0 {
			delete(b.queues, sku)
			b.mu.Unlock()
			bt.cancel()
			return
		}
		b.mu.Unlock()
		b.write(bt.ctx, sku, reqs)
		bt.cancel()
		clear(reqs)
	}
}

// take moves up to the batch size of q's waiting requests, in arrival
// order, into reqs, and drops abandoned ones. An order whose ID is in the
// batch already stays queued for the next batch, which answers it from the
// record the first one left. Call with b.mu held.
func (b *Batched) take(q *queue, reqs []*request, bt *batch) []*request {
	var ids map[string]struct{} // allocated at the first order
	kept := q.pending[:0]
	for i := 0; i < len(q.pending); i++ {
		r := q.pending[i]
		if r.state.Load() != waiting {
			continue
		}
		if len(reqs) == b.size {
			kept = append(kept, q.pending[i:]...)
			break
		}
		if r.order != nil {
			if _, dup := ids[r.order.id]; dup {
				kept = append(kept, r)
				continue
			}
			if ids == nil {
				ids = map[string]struct{}{}
			}
			ids[r.order.id] = struct{}{}
		}
		r.batch = bt
		reqs = append(reqs, r)
	}
	clear(q.pending[len(kept):])
	q.pending = kept
	bt.live.Store(int64(len(reqs)))
	return reqs
}

// write applies the requests of one batch and answers each one that has
// not been abandoned.
func (b *Batched) write(ctx context.Context, sku string, reqs []*request) {
	var members []*request
	err := b.send(ctx, sku, func() []*request {
		// Claim the members last thing before the first write: one that
		// gives up until here is dropped without effect.
		members = members[:0]
		for _, r := range reqs {
			if claim(r) {
				members = append(members, r)
			}
		}
		return members
	})
	b.count(len(members))
	for _, r := range reqs {
		// Requests not claimed yet met an error from before the first
		// write, which applied nothing: it is their answer too.
		if !claim(r) {
			continue
		}
		r.done <- r.result(err)
	}
}

// send writes the requests members returns, called right before the
// first write, retrying after a deadlock.
func (b *Batched) send(ctx context.Context, sku string, members func() []*request) error {
	return b.retrier.Do(ctx, func(ctx context.Context) error {
		return b.pinned(ctx, b.session, func(ctx context.Context, conn *sqlx.Conn) error {
			var m []*request
			for _, r := range members() {
				if !r.settled { // answered by an earlier attempt, for good
					r.refused = nil
					m = append(m, r)
				}
			}
			if len(m) == 0 {
				return nil
			}
			return b.apply(ctx, conn, sku, m)
		})
	})
}

func (b *Batched) count(members int) {
	if members > 0 {
		b.batches.Add(1)
		b.requests.Add(int64(members))
	}
}

// claim reports whether r is, or has now been, claimed by a write, and so
// is still awaiting its answer.
func claim(r *request) bool {
	return r.state.Load() == claimed || r.state.CompareAndSwap(waiting, claimed)
}

// apply writes the members' total with one conditional UPDATE and falls
// back to granting them one by one under the row lock when it does not
// fit. A member the fallback refuses gets its own error in refused. When
// members carry orders, they are recorded in the same transaction (see
// applyOrders).
func (b *Batched) apply(ctx context.Context, conn *sqlx.Conn, sku string, members []*request) error {
	// Beyond MaxQty no stock level can hold the total: skip the UPDATE.
	total := total(members)
	if slices.ContainsFunc(members, func(r *request) bool { return r.order != nil }) {
		return b.applyOrders(ctx, conn, sku, members, total)
	}
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
		err := tx.QueryRowxContext(ctx, b.lq.lockLevel, sku).Scan(&have)
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
		err = tx.QueryRowxContext(ctx, b.lq.hasExpired, sku).Scan(&expired)
		switch {
		case isServerError(err, erNoSuchTable): // no ledger, no holds
		case err != nil:
			return classify(ctx, err, unsent)
		case expired:
			if reclaimed, err = b.reclaimIn(ctx, tx, own(members), sku); err != nil {
				return err
			}
		}
		if reclaimed == 0 {
			break
		}
	}
	var granted int64
	var refused []*request
	for _, r := range members {
		if left := have - granted; r.qty > left {
			r.refused = insufficient(sku, r.qty, left)
			refused = append(refused, r)
		} else {
			granted += r.qty
		}
	}
	if granted == 0 && reclaimed == 0 {
		return errNothingGranted
	}
	// Commit what was granted and reclaimed, without the refused.
	if err := b.unrecord(ctx, tx, sku, refused); err != nil || granted == 0 {
		return err
	}
	_, err := tx.ExecContext(ctx, b.q.takeHeld, granted, sku)
	return classify(ctx, err, unsent)
}

// own returns the IDs of the orders among members, which their batch's
// transaction records (see reclaimIn).
func own(members []*request) map[string]bool {
	var ids map[string]bool
	for _, r := range members {
		if r.order != nil {
			if ids == nil {
				ids = make(map[string]bool, len(members))
			}
			ids[r.order.id] = true
		}
	}
	return ids
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
