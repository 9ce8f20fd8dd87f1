package combine

import (
	"context"
	"runtime"
	"sync/atomic"
)

// Batch is what one write carries: a drainer's batch of queued requests,
// or one request written alone. A drainer's batch runs under a context of
// its own, not any caller's; that context ends only when every member has
// stopped waiting for it.
//
// A Write may run on after it returned — a supervised request whose
// context ended goes on in a goroutine of its own — so nothing of a Batch
// is reused for the next one, and Members may be called late.
type Batch[T any] struct {
	reqs    []*request[T] // a drainer's batch, in arrival order; nil when alone
	alone   []*T          // the one request written alone
	claimed atomic.Int64  // how many requests Members returned last
	last    []*request[T] // the requests Members returned last

	ctx    context.Context
	cancel context.CancelFunc
	live   atomic.Int64 // members still waiting

	until <-chan struct{} // see Continues; nil: the write ended when Write returned
}

// Continues tells the Combiner that the write goes on after Write returns
// — its callers were answered early, its statement still runs — until
// done is closed. Until then the key stays busy: later requests queue,
// and no other batch of the key is written beside it, so a request that
// repeats an abandoned one never races it. Call it before Write returns.
func (b *Batch[T]) Continues(done <-chan struct{}) { b.until = done }

// Members claims the batch's requests that have not been abandoned — last
// thing before the first write: one that gives up until here is dropped
// without effect — and returns them in arrival order. Called again, it
// returns the same requests: a claimed request stays claimed; under
// Config.Sealed it leaves out those whose callers left since (see Seal).
// Called after every member gave up, it returns none.
func (b *Batch[T]) Members() []*T {
	if b.reqs == nil {
		return b.alone // its caller waits for the write, unclaimed
	}
	vals := make([]*T, 0, len(b.reqs))
	b.last = b.last[:0]
	for _, r := range b.reqs {
		if r.claim() && !r.left.Load() {
			vals = append(vals, &r.val)
			b.last = append(b.last, r)
		}
	}
	b.claimed.Store(int64(len(vals)))
	return vals
}

// Seal, under Config.Sealed, marks the requests Members returned last as
// on their way — a caller who leaves from now on is answered
// ErrOutcomeUnknown — before their write can take effect (see
// Config.Sealed). It reports false when one of them has left since: that
// one must not be written, so the Write ends this attempt without effect
// and starts over with Members (which leaves it out). A request written
// alone is its caller's own call: Seal reports true.
func (b *Batch[T]) Seal() bool {
	ok := true
	for _, r := range b.last {
		if !r.state.CompareAndSwap(claimed, sealed) && (r.state.Load() != sealed || r.left.Load()) {
			ok = false
		}
	}
	return ok
}

// Queued reports whether b is a drainer's batch of queued requests: its
// context is its own, not a caller's, and when it ends every member has
// already been answered (see Combiner), so a Write need not answer early.
// It is false for a request written alone, on its caller's goroutine and
// context.
func (b *Batch[T]) Queued() bool { return b.reqs != nil }

func (b *Batch[T]) leave() {
	if b.live.Add(-1) == 0 {
		b.cancel()
	}
}

// drain writes key's queue batch after batch until it finds it empty, then
// forgets key, so that idle keys cost no memory. A request written alone
// starts it when others queued meanwhile: one drainer per busy key.
func (c *Combiner[T]) drain(key string, q *queue[T]) {
	for {
		bt := &Batch[T]{}
		bt.ctx, bt.cancel = context.WithCancel(context.Background())
		c.mu.Lock()
		reqs := c.take(q, nil, bt)
		if len(reqs) == 0 {
			delete(c.queues, key)
			c.mu.Unlock()
			bt.cancel()
			return
		}
		bt.reqs = reqs
		c.mu.Unlock()
		c.write(key, bt)
		if bt.until != nil {
			<-bt.until
		}
		bt.cancel()
		// The callers just answered are runnable, not yet running: yield
		// once, so that those calling again at once queue before the next
		// take. Otherwise callers in a loop split into two halves that take
		// turns — the batch in flight and the queue behind it — and each
		// write (on a hot row, a commit) carries half of them.
		runtime.Gosched()
	}
}

// take moves up to Size of q's waiting requests, in arrival order, into
// reqs, and drops abandoned ones. A request Apart keeps out of the batch
// stays queued for the next one. Call with c.mu held.
func (c *Combiner[T]) take(q *queue[T], reqs []*request[T], bt *Batch[T]) []*request[T] {
	var names map[string]struct{} // allocated at the first named request
	kept := q.pending[:0]
	for i := 0; i < len(q.pending); i++ {
		r := q.pending[i]
		if r.state.Load() != waiting {
			continue
		}
		if len(reqs) == c.cfg.Size {
			kept = append(kept, q.pending[i:]...)
			break
		}
		if c.cfg.Apart != nil {
			if name := c.cfg.Apart(&r.val); name != "" {
				if _, dup := names[name]; dup {
					kept = append(kept, r)
					continue
				}
				if names == nil {
					names = map[string]struct{}{}
				}
				names[name] = struct{}{}
			}
		}
		r.batch = bt
		reqs = append(reqs, r)
	}
	clear(q.pending[len(kept):])
	q.pending = kept
	bt.live.Store(int64(len(reqs)))
	return reqs
}

// write writes bt under its own context and answers each of its requests
// that has not been abandoned.
func (c *Combiner[T]) write(key string, bt *Batch[T]) {
	err := c.cfg.Write(bt.ctx, key, bt)
	c.count(int(bt.claimed.Load()))
	for _, r := range bt.reqs {
		// Requests not claimed yet met an error from before the first
		// write, which applied nothing: it is their answer too.
		if r.claim() {
			r.done <- c.cfg.Answer(&r.val, err)
		}
	}
}
