package combine

import (
	"context"
	"fmt"
	"sync/atomic"

	"github.com/stockguard/stockguard"
	"github.com/stockguard/stockguard/strategy"
)

// A request's state: waiting in a queue or in a batch not yet written,
// claimed by a write (its outcome now depends on the backend), or
// abandoned by its caller before any write carried it.
const (
	waiting int32 = iota
	claimed
	sealed // Config.Sealed: a statement writing it is on its way
	abandoned
)

// request is one queued caller's v.
type request[T any] struct {
	val   T
	state atomic.Int32
	batch *Batch[T] // set, under Combiner.mu, when a drainer takes the request
	done  chan error
	left  atomic.Bool // its caller left after it was sealed (Config.Sealed)
}

// claim reports whether r is, or has now been, claimed by a write, and so
// is still awaiting its answer.
func (r *request[T]) claim() bool {
	switch r.state.Load() {
	case claimed, sealed:
		return true
	}
	return r.state.CompareAndSwap(waiting, claimed)
}

// abandon answers a request whose context ended before its answer came.
func (c *Combiner[T]) abandon(ctx context.Context, r *request[T]) error {
	c.mu.Lock()
	left := r.state.CompareAndSwap(waiting, abandoned) ||
		c.cfg.Sealed && r.state.CompareAndSwap(claimed, abandoned)
	bt := r.batch
	c.mu.Unlock()
	if left {
		// Still queued, taken but not yet claimed, or claimed but not yet
		// sealed: no write will carry it.
		if bt != nil {
			bt.leave()
		}
		return strategy.Canceled(ctx)
	}
	select {
	case err := <-r.done:
		return err
	default:
	}
	if c.cfg.Sealed {
		r.left.Store(true) // a later attempt leaves it out (see Batch.Seal)
	}
	bt.leave()
	return fmt.Errorf("%w: the context ended (%v) while the batch carrying the request was being written", stockguard.ErrOutcomeUnknown, ctx.Err())
}
