package combine

import (
	"context"
	"sync"
	"sync/atomic"
)

// Config says how a Combiner writes batches of requests of type T.
type Config[T any] struct {
	// Size bounds how many requests one batch carries; at least 1.
	Size int

	// Write writes one batch of key's requests under ctx and returns its
	// error. Right before its first write it calls b.Members and writes
	// what that returns, in arrival order: Members claims the batch's
	// requests last thing, so that a caller giving up until then is left
	// out, with nothing applied. A Write that tries again may call Members
	// again; it returns the same requests.
	Write func(ctx context.Context, key string, b *Batch[T]) error

	// Answer returns a request's answer once the Write that carried it,
	// or failed before claiming it, returned err.
	Answer func(v *T, err error) error

	// Apart, if set, names requests that must not share a batch: of the
	// waiting requests with the same non-empty name, a batch takes the
	// first, and the others stay queued, in order, for the next batches.
	Apart func(v *T) string
	// Sealed says that Write calls Batch.Seal before each write of the
	// requests can take effect — right before an autocommit statement, or
	// inside a transaction before its COMMIT — and writes nothing of an
	// attempt whose Seal reports false: a caller who leaves before Seal is
	// dropped — answered with its context's error — and never written,
	// even by a later attempt of the batch. Without it a request is in
	// flight from Members on: a caller who leaves then is answered
	// ErrOutcomeUnknown, and the request may be written after it left.
	Sealed bool
}

// Combiner combines concurrent requests for one key into batches. A
// request that finds its key idle is written alone, at once, on its
// caller's goroutine and context; requests arriving meanwhile queue, and
// when that write returns, one drainer goroutine per busy key writes the
// queue batch after batch (at most Size requests each, in arrival order)
// until it finds it empty, then forgets the key. Between batches the
// drainer yields once, so that callers it answered who call again at once
// join the next batch. A batch's write runs
// under a context of its own, which ends only when every member has
// stopped waiting for it: one caller giving up must not abort the others'
// write. A Combiner is safe for concurrent use.
type Combiner[T any] struct {
	cfg Config[T]

	mu     sync.Mutex
	queues map[string]*queue[T] // keys being written; removed when idle

	batches  atomic.Int64
	requests atomic.Int64
}

// queue holds one key's waiting requests in arrival order.
type queue[T any] struct{ pending []*request[T] }

// New returns a Combiner that writes batches as cfg says.
func New[T any](cfg Config[T]) *Combiner[T] {
	return &Combiner[T]{cfg: cfg, queues: map[string]*queue[T]{}}
}

// Do has v written in a batch of key's requests and returns its answer
// (see Config.Answer). When ctx ends first, Do returns the context's
// error if no write has claimed v — v is dropped, nothing applied — and
// otherwise v's answer if it has come, else an error wrapping
// stockguard.ErrOutcomeUnknown. A request written alone, on ctx, waits
// for its write's answer.
func (c *Combiner[T]) Do(ctx context.Context, key string, v T) error {
	c.mu.Lock()
	q, busy := c.queues[key]
	if !busy {
		q = &queue[T]{}
		c.queues[key] = q
		c.mu.Unlock()
		return c.alone(ctx, key, q, v)
	}
	r := &request[T]{val: v, done: make(chan error, 1)}
	q.pending = append(q.pending, r)
	c.mu.Unlock()
	select {
	case err := <-r.done:
		return err
	case <-ctx.Done():
		return c.abandon(ctx, r)
	}
}

// alone writes v by itself, then hands q over to a drainer if requests
// queued meanwhile, else forgets key. Nobody else can answer v, so it is
// never claimed: its caller waits for the write, whatever its ctx does.
func (c *Combiner[T]) alone(ctx context.Context, key string, q *queue[T], v T) error {
	s := &solo[T]{val: v}
	s.one[0] = &s.val
	s.b.alone = s.one[:]
	defer func() {
		if until := s.b.until; until != nil {
			// The write runs on (see Batch.Continues): the key stays
			// busy until it has ended.
			go func() {
				<-until
				c.next(key, q)
			}()
			return
		}
		c.next(key, q)
	}()
	err := c.cfg.Write(ctx, key, &s.b)
	c.count(1)
	return c.cfg.Answer(&s.val, err)
}

// next hands q over to a drainer if requests queued behind a write alone,
// else forgets key.
func (c *Combiner[T]) next(key string, q *queue[T]) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(q.pending) > 0 {
		go c.drain(key, q)
	} else {
		delete(c.queues, key)
	}
}

// solo is a request written alone: its batch of one, in one allocation.
type solo[T any] struct {
	b   Batch[T]
	val T
	one [1]*T
}

// count adds a write of n requests to the Stats; a batch whose requests
// were all abandoned before its write is not one.
func (c *Combiner[T]) count(n int) {
	if n > 0 {
		c.batches.Add(1)
		c.requests.Add(int64(n))
	}
}

// Stats returns the writes attempted since c was created and the requests
// they carried: for a batch written in attempts, those its last attempt
// claimed.
func (c *Combiner[T]) Stats() (batches, requests int64) {
	return c.batches.Load(), c.requests.Load()
}

// Pending returns how many requests wait in key's queue, or -1 when key is
// idle: tests wait on it for a queue to form or be taken.
func (c *Combiner[T]) Pending(key string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	if q := c.queues[key]; q != nil {
		return len(q.pending)
	}
	return -1
}

// Busy returns how many keys are being written: tests wait on it for every
// key to be forgotten.
func (c *Combiner[T]) Busy() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.queues)
}
