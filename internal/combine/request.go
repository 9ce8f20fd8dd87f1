package combine

import (
	"context"
	"fmt"
	"sync/atomic"

	"github.com/stockguard/stockguard"
)

// A request's state: waiting in a queue or in a batch not yet written,
// claimed by a write (its outcome now depends on the backend), or
// abandoned by its caller before any write carried it.
const (
	waiting int32 = iota
	claimed
	abandoned
)

// request is one queued caller's v.
type request[T any] struct {
	val   T
	state atomic.Int32
	batch *Batch[T] // set, under Combiner.mu, when a drainer takes the request
	done  chan error
}

// claim reports whether r is, or has now been, claimed by a write, and so
// is still awaiting its answer.
func (r *request[T]) claim() bool {
	return r.state.Load() == claimed || r.state.CompareAndSwap(waiting, claimed)
}

// abandon answers a request whose context ended before its answer came.
func (c *Combiner[T]) abandon(ctx context.Context, r *request[T]) error {
	c.mu.Lock()
	left := r.state.CompareAndSwap(waiting, abandoned)
	bt := r.batch
	c.mu.Unlock()
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
