package mysqllock

import (
	"context"
	"sync/atomic"

	"github.com/jmoiron/sqlx"

	"github.com/stockguard/stockguard"
	"github.com/stockguard/stockguard/internal/combine"
	"github.com/stockguard/stockguard/strategy"
)

// readQueue is the key of a Batched's queue of Order calls.
const readQueue = "order reads"

// orderRead is one Order call for a combined read; the read answers it in
// out.
type orderRead struct {
	id  string
	out *readOut
}

// readOut is a combined read's answer to one Order call: info or err, or
// alone when the call must read by itself (see Batched.Order).
type readOut struct {
	info  stockguard.OrderInfo
	err   error
	alone bool
}

func (r *orderRead) result(err error) error { return err }

// Order reports the order applied under id, as Atomic.Order does. The
// Order calls made on the instance while a read of its is in flight go
// out together, as one SELECT of their records: a consumer that checks a
// batch of orders on it (package tiered does) costs the server one
// statement. A call whose hold is past its deadline then reads again by
// itself, reclaiming it, and so does every call of a combined read that
// failed. Its errors are Atomic.Order's.
func (b *Batched) Order(ctx context.Context, id string) (stockguard.OrderInfo, error) {
	if err := b.check(ctx, strategy.ValidateID(id)); err != nil {
		return stockguard.OrderInfo{}, err
	}
	out := &readOut{}
	if err := b.reads.Do(ctx, readQueue, orderRead{id: id, out: out}); err != nil {
		return stockguard.OrderInfo{}, err
	}
	if out.alone {
		return b.ledger.Order(ctx, id)
	}
	return out.info, out.err
}

// readOrders reads the records of bt's Order calls in one statement and
// answers each from its record.
func (b *Batched) readOrders(ctx context.Context, _ string, bt *combine.Batch[orderRead]) error {
	reads := bt.Members()
	if len(reads) == 0 {
		return nil
	}
	ids := make([]any, 0, len(reads))
	asked := map[string]bool{}
	for _, r := range reads {
		if !asked[r.id] {
			asked[r.id] = true
			ids = append(ids, r.id)
		}
	}
	// The read runs on a supervised goroutine that may outlive the batch
	// when every caller left: it hands its result over atomically.
	var found atomic.Pointer[map[string]orderRecord]
	_ = b.pinned(ctx, b.session, func(ctx context.Context, conn *sqlx.Conn) error {
		records, err := b.readAll(ctx, conn, ids)
		if err == nil {
			found.Store(&records)
		}
		return err
	})
	records := found.Load() // nil when the read failed
	for _, r := range reads {
		if records == nil {
			r.out.alone = true // Order's own read retries
			continue
		}
		rec, ok := (*records)[r.id]
		// A hold past its deadline is read again alone: Order's own read
		// reclaims it.
		r.out.info, r.out.alone, r.out.err = answerOf(r.id, rec, ok)
	}
	return nil
}
