package redislock

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"

	"github.com/stockguard/stockguard/internal/errtext"
	"github.com/stockguard/stockguard/internal/redisx"
	"github.com/stockguard/stockguard/redislock/lock"
	"github.com/stockguard/stockguard/strategy"
)

// WithSegmentLocks makes NewSegmented take from a segment the classic way
// — lock the segment, take, unlock — so that the harness can compare it
// with the lock-free take. Default off.
//
// Every Decrement has an owner token of its own and starts at a random
// segment, taking from the first whose lock is free. A busy lock means
// retry, never sold out: sold out is decided as for Segmented, and a
// request no single segment can serve is gathered across segments. The
// take is NewAtomic's script (exists, enough, DECRBY) and checks, in the
// same script, that the segment's lock still holds the taker's token, so a
// buyer whose lease ran out cannot write. A segment's lock
// ("<p>seglock:{s#i}") shares the segment's hash tag, is taken with SET NX
// PX and a lease of WithLockTTL, and leaves nothing behind once released
// (lock.NoFence). Empty segments stay, at 0.
//
// The lock adds two round trips to every take and protects nothing the
// take's own script does not already check; expect it to be slower than the
// default, lock-free mode. As buyers queue for the locks, the retry policy
// is, unless WithRetry says otherwise, 50 attempts with a backoff that grows
// with the number of buyers waiting (Adaptive) and stockguard's default
// delays.
func WithSegmentLocks() Option {
	return func(o *options) {
		o.given |= optSegmentLocks
		o.segmentLocks = true
	}
}

// errSegmentBusy: the segment's lock is held by another buyer.
var errSegmentBusy = errors.New("redislock: segment busy")

// segmentLocksRetry is the default retry policy with segment locks.
var segmentLocksRetry = strategy.RetryPolicy{MaxAttempts: 50, Adaptive: true}

// decrementLocked is one attempt of Decrement with segment locks: from a
// random start, the first segment whose lock is free is locked and taken
// from; a request that segment cannot serve goes down the slow path, and a
// request that finds every segment locked asks for a retry.
func (s *Segmented) decrementLocked(ctx context.Context, sku string, qty int64) error {
	start := rand.IntN(s.n)
	for j := range s.n {
		err := s.takeLocked(ctx, sku, (start+j)%s.n, qty)
		switch {
		case errors.Is(err, errSegmentBusy):
			continue
		case errors.Is(err, errSegmentShort):
			return s.slow(ctx, sku, qty)
		}
		return err
	}
	return strategy.Retry(fmt.Errorf("redislock: every segment of %q is locked", sku))
}

// takeLocked takes qty units from segment i of sku under the segment's
// lock. It returns nil, errSegmentBusy, errSegmentShort or a contract error.
func (s *Segmented) takeLocked(ctx context.Context, sku string, i int, qty int64) error {
	seg := segment(sku, i)
	// No fencing counter: the take checks the owner token itself, and a
	// segment lock leaves nothing behind once released.
	l, err := s.segLocks.Obtain(ctx, seg, s.lease, lock.NoFence())
	switch {
	case errors.Is(err, lock.ErrNotObtained):
		return errSegmentBusy
	case err != nil:
		// The lock may have been set; it expires with its lease.
		return errtext.Wrap(redisx.Classify(ctx, err, redisx.Read), "redislock: lock segment %d of %q", i, sku)
	}
	defer func() {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.lease)
		_ = l.Release(ctx)
		cancel()
	}()
	if err := strategy.Canceled(ctx); err != nil {
		return err
	}
	key := s.segKey(sku, i)
	left, err := atomicScript.Run(ctx, s.once, []string{key, s.segLocks.LockKey(seg)}, qty, l.OwnerToken()).Int64()
	if err == nil && left == -4 {
		return errSegmentBusy // the lease ran out before the take
	}
	return taken(ctx, sku, key, left, err)
}
