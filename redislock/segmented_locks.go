package redislock

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"

	"github.com/stockguard/stockguard"
	"github.com/stockguard/stockguard/internal/redisx"
)

// WithSegmentLocks makes NewSegmented take from a segment the way seed 002
// does — lock the segment, take, unlock — with the seed's bugs fixed, so the
// harness can compare it with the lock-free take. Default off.
//
// The seed (a Spring controller over three Lua scripts: TRY_LOCK, DECR,
// UN_LOCK) gets these wrong, and this mode gets them right:
//
//   - The lock object lives in a field of a singleton controller, so
//     concurrent requests overwrite each other's lock and one request takes
//     or unlocks with another's — here every Decrement has its own owner
//     token.
//   - Busy segments and a sold-out SKU look the same: TRY_LOCK returns nil
//     when every segment is locked, and the caller reports "sold out" — a
//     false sold-out under exactly the load segments are for. Here busy
//     means retry, and sold-out is only ever decided as for Segmented.
//   - Every buyer scans the segments in the same HKEYS order, so they pile
//     onto the first one; here each starts at a random segment.
//   - The DECR script as printed tests tonumber(kuNum) <= 1: it takes only
//     from a segment with at most one unit, down to −1, and refuses full
//     ones. GET of a missing key is false in Lua, not nil, so its nil check
//     never fires. Here the take is NewAtomic's script: exists, enough, then
//     DECRBY.
//   - decr's result is ignored: the controller congratulates the buyer
//     whatever it returned (0: nothing taken). Here every outcome is an
//     error or nil.
//   - One unit at a time (DECR), and no way to buy more units than one
//     segment holds even when the SKU has them: here qty is free and a
//     request no segment can serve is gathered across segments.
//   - UN_LOCK deletes a segment, and its hash entry, when it reaches 0, so a
//     sold-out SKU becomes an unknown one and its stock can no longer be
//     summed. Here segments stay, at 0.
//   - The scripts use keys they read from a hash instead of declaring them
//     in KEYS, which Redis Cluster rejects; the lock and the stock are not
//     in one slot either. Here a segment's lock ("<p>seglock:{s#i}") and
//     stock share the segment's hash tag.
//   - init gives allnum/subnum segments subnum units each (the two swapped,
//     the remainder lost) and names them by timestamp plus a random number,
//     which collide. Here SetStock spreads exactly.
//   - The lock has a 5-second EXPIRE set by SETNX-then-EXPIRE (atomic only
//     because it runs inside the script). Here it is SET NX PX with a lease
//     of WithLockTTL.
//
// What the seed does get right is kept: the take checks, in the same script
// as the write, that the segment's lock still holds the taker's token, so a
// buyer whose lease ran out cannot write.
//
// The lock adds two round trips to every take and protects nothing the
// take's own script does not already check; expect it to be slower than the
// default, lock-free mode. As buyers queue for the locks, the retry policy
// is, unless WithRetry says otherwise, 50 attempts with a backoff that grows
// with the number of buyers waiting (Adaptive) and stockguard's default
// delays.
func WithSegmentLocks() Option {
	return func(o *options) { o.segmentLocks = true }
}

// errSegmentBusy: the segment's lock is held by another buyer.
var errSegmentBusy = errors.New("redislock: segment busy")

// segmentLocksRetry is the default retry policy with segment locks.
var segmentLocksRetry = stockguard.RetryPolicy{MaxAttempts: 50, Adaptive: true}

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
	return stockguard.Retry(fmt.Errorf("redislock: every segment of %q is locked", sku))
}

// takeLocked takes qty units from segment i of sku under the segment's
// lock. It returns nil, errSegmentBusy, errSegmentShort or a contract error.
func (s *Segmented) takeLocked(ctx context.Context, sku string, i int, qty int64) error {
	seg := segment(sku, i)
	k := s.segLocks.unfencedKeys(seg) // the take checks the owner itself
	owner := newToken()
	got, _, err := s.segLocks.attempt(ctx, k, owner, s.lease, false)
	if err != nil {
		// The lock may have been set; it expires with its lease.
		return fmt.Errorf("redislock: lock segment %d of %q: %w", i, sku, redisx.Classify(ctx, err, redisx.Read))
	}
	if got == 0 {
		return errSegmentBusy
	}
	defer func() {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.lease)
		_, _ = s.segLocks.releaseOwned(ctx, k, owner)
		cancel()
	}()
	if err := stockguard.Canceled(ctx); err != nil {
		return err
	}
	key := s.segKey(sku, i)
	left, err := atomicScript.Run(ctx, s.once, []string{key, k.lock}, qty, owner).Int64()
	if err == nil && left == -4 {
		return errSegmentBusy // the lease ran out before the take
	}
	return taken(ctx, sku, key, left, err)
}
