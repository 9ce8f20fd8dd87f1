package combine

import (
	"context"
	"sync/atomic"
)

// batch is one write in flight. It runs under a context of its own, not
// any caller's; the context ends only when every member has stopped
// waiting for it.
type batch[T any] struct {
	ctx    context.Context
	cancel context.CancelFunc
	live   atomic.Int64 // members still waiting
}

func (bt *batch[T]) leave() {
	if bt.live.Add(-1) == 0 {
		bt.cancel()
	}
}

// drain writes key's queue batch after batch until it finds it empty, then
// forgets key, so that idle keys cost no memory. A request written alone
// starts it when others queued meanwhile: one drainer per busy key.
func (c *Combiner[T]) drain(key string, q *queue[T]) {
	var reqs []*request[T]
	var vals []T
	for {
		bt := &batch[T]{}
		bt.ctx, bt.cancel = context.WithCancel(context.Background())
		c.mu.Lock()
		reqs = c.take(q, reqs[:0], bt)
		if len(reqs) == 0 {
			delete(c.queues, key)
			c.mu.Unlock()
			bt.cancel()
			return
		}
		c.mu.Unlock()
		vals = c.write(bt.ctx, key, reqs, vals[:0])
		bt.cancel()
		clear(reqs)
		clear(vals)
	}
}

// take moves up to Size of q's waiting requests, in arrival order, into
// reqs, and drops abandoned ones. A request Apart keeps out of the batch
// stays queued for the next one. Call with c.mu held.
func (c *Combiner[T]) take(q *queue[T], reqs []*request[T], bt *batch[T]) []*request[T] {
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
			if name := c.cfg.Apart(r.val); name != "" {
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

// write writes one batch and answers each request that has not been
// abandoned. It returns vals, the buffer members fills, for reuse.
func (c *Combiner[T]) write(ctx context.Context, key string, reqs []*request[T], vals []T) []T {
	members := func() []T {
		// Claim the members last thing before the first write: one that
		// gives up until here is dropped without effect.
		vals = vals[:0]
		for _, r := range reqs {
			if r.claim() {
				vals = append(vals, r.val)
			}
		}
		return vals
	}
	err := c.cfg.Write(ctx, key, members)
	c.count(len(vals))
	for _, r := range reqs {
		// Requests not claimed yet met an error from before the first
		// write, which applied nothing: it is their answer too.
		if r.claim() {
			r.done <- c.cfg.Answer(r.val, err)
		}
	}
	return vals
}
