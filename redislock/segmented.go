package redislock

import (
	"cmp"
	"context"
	crand "crypto/rand"
	_ "embed"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stockguard/stockguard"
	"github.com/stockguard/stockguard/internal/errtext"
	"github.com/stockguard/stockguard/internal/rediskeys"
	"github.com/stockguard/stockguard/internal/redisx"
	"github.com/stockguard/stockguard/redislock/lock"
	"github.com/stockguard/stockguard/strategy"
)

// DefaultSegments is the number of segments NewSegmented splits a SKU's
// stock into unless WithSegments says otherwise.
const DefaultSegments = 8

// MaxSegments caps WithSegments.
const MaxSegments = 1024

// holdTTL is how long units taken by a gather stay recorded in their hold
// keys. A gather lasts milliseconds, and one that stalls or dies is rolled
// back by the next gather of its SKU; only if none comes for this long are
// the held units gone for good.
const holdTTL = 24 * time.Hour

// WithSegments sets the number of segments NewSegmented spreads a SKU's
// stock over when it stocks it (SetStock), between 1 and MaxSegments.
// Default DefaultSegments. Reads and gathers use the count stored with the
// SKU, so instances configured with different counts share SKUs safely.
func WithSegments(n int) Option {
	return func(o *options) {
		o.given |= optSegments
		if n < 1 || n > MaxSegments {
			o.fail(fmt.Errorf("%d segments outside 1…%d", n, MaxSegments))
			return
		}
		o.segments = n
	}
}

var (
	//go:embed segmented_take.lua
	segmentedTakeLua string
	//go:embed segmented_return.lua
	segmentedReturnLua string
	//go:embed segmented_decide.lua
	segmentedDecideLua string

	segmentedTakeScript   = redis.NewScript(levelLua + segmentedTakeLua)
	segmentedReturnScript = redis.NewScript(segmentedReturnLua)
	segmentedDecideScript = redis.NewScript(segmentedDecideLua)
)

// Segmented is an Inventory that splits each SKU's stock into segments,
// each in its own Redis key with its own hash tag, so that in a
// Redis Cluster the segments of one hot SKU land on different slots — and
// masters — and its buyers spread over them instead of queueing on one key.
//
// On a single Redis server segments buy nothing: the server runs one
// command at a time whichever key it touches, so Segmented is at best as
// fast as NewAtomic there (and keeping every segment in the SKU's one slot,
// which would allow one script over all of them, would pin the SKU to one
// master in a cluster too). Segmented is for clusters; the price of spreading
// is that no script can span the segments, and the design below pays it.
//
// Keys, for SKU s with prefix p: segment i is "<p>segstock:{s#i}", a
// decimal level as NewAtomic keeps it; "<p>segmeta:{s}" is a hash holding
// the segment count ("n") and the records of gathers in progress; the
// SKU's gather lock is "<p>seggatherlock:{s}" with its fencing counter
// "<p>seggatherfence:{s}" (a lock.Client lock: every acquisition bumps the
// counter); a gather's hold on segment i is "<p>seghold:{s#i}:<id>". A SKU
// that was never stocked gets none of them: requests for it find no
// segment and no count, and take no lock.
//
// Decrement first tries one segment chosen at random: one script, which
// takes qty units if that segment has them (the common case, one round
// trip). Otherwise it reads the segment count and every level, and takes
// from a segment that has enough. When none has enough but together they
// do — near sell-out, or a qty larger than a segment — it gathers:
//
//   - under the SKU's gather lock it records the gather as pending in the
//     meta hash, then takes pieces from the fullest segments, each piece one
//     script that also records it in a hold key in the segment's own slot;
//   - it commits by deleting its pending record — one script in one slot,
//     the single commit point. Held units are sold from that instant;
//   - if the segments run dry first, or anything fails before the commit, it
//     marks the record aborted, gives every piece back and drops the
//     record. A gatherer that dies or stalls past its lease leaves its
//     record behind; the next gather (or SetStock) of the SKU marks it
//     aborted — after which its owner can no longer commit — and gives its
//     pieces back.
//
// So a gather is all or nothing, also when replies are lost, without a
// script over several slots. It is not isolated: while it holds pieces,
// others see fewer units in those segments.
//
// Never a false sold-out: ErrInsufficientStock comes only from a gather
// that, holding the lock (so no other gather holds units), found fewer than
// qty units in all segments together; or from a check without the lock:
// the levels of all segments summed to less than qty, read between two
// reads of the meta slot that both saw no gather lock, no gather record and
// the same gather count — so no units were held in flight meanwhile, and as
// segments only shrink outside gathers, the stock really was below qty when
// the last level was read. If the total is at least qty and nobody else
// takes it, the request succeeds.
//
// Not atomic over a SKU: SetStock runs under the gather lock, so it never
// mixes with a gather, but a concurrent Decrement may take from a segment
// before or after it is overwritten; Stock sums levels read one after
// another (retried until it reads between two quiet meta reads, so never a
// half-written SetStock or units held by a running gather), which under
// concurrent decrements lies between the stock at its start and at its
// end. Units held by a gatherer that died are not counted until the next
// gather of the SKU gives them back. The gather lock is a lease: a gatherer
// stalled past it (a pause longer than WithLockTTL) can make another
// request see a false sold-out; it oversells or loses nothing unless the
// stall also outlasts a SetStock of the SKU (its late give-back then lands
// on the new levels) or the day for which holds are kept.
//
// Writes that would not be safe to repeat are sent at most once, so a lost
// reply is ErrOutcomeUnknown, never a second take. A Segmented is safe for
// concurrent use.
type Segmented struct {
	rdb      redis.UniversalClient
	w        redisx.ScriptClient // rdb, each write followed by the ack's WAIT (WithReplicaAck)
	once     redis.Scripter      // w with EVAL/EVALSHA sent at most once
	acked    bool                // WithReplicaAck or WithAOFAck
	keys     rediskeys.Keys
	n        int
	gather   *lock.Client // the SKU's gather lock
	segLocks *lock.Client // WithSegmentLocks: the segments' locks; nil without
	lease    time.Duration
	retrier  *strategy.Retrier
}

var (
	_ stockguard.Inventory  = (*Segmented)(nil)
	_ strategy.RetryCounter = (*Segmented)(nil)
)

// NewSegmented returns a Segmented inventory over rdb — a cluster client to
// spread the segments, though any client works. It reads the options
// WithPrefix, WithSegments, WithSegmentLocks, WithRetry (how often a request
// that lost a race, or found the gather lock busy, tries again) and
// WithLockTTL (lease of the gather and segment locks; default
// DefaultLockTTL), WithReplicaAck and WithAOFAck (every write, its locks'
// included, waits for the ack; SetStock's segment writes then go one by
// one, each to its own master).
func NewSegmented(rdb redis.UniversalClient, opts ...Option) (*Segmented, error) {
	o := newOptions(opts)
	o.only("NewSegmented", readsSegmented)
	if o.err != nil {
		return nil, o.err
	}
	return newSegmented(rdb, o), nil
}

// newSegmented builds what NewSegmented returns, from valid options.
func newSegmented(rdb redis.UniversalClient, o options) *Segmented {
	w := redisx.Acked(rdb, o.ack)
	s := &Segmented{
		rdb:     rdb,
		w:       w,
		once:    redisx.OnceScripter(w),
		acked:   o.ack.On(),
		keys:    o.keys,
		n:       o.segments,
		gather:  lockClient(rdb, o.lockAck(lock.WithPrefix(o.keys.Prefix+"seggather"))...),
		lease:   o.lockTTL,
		retrier: strategy.NewRetrier(o.retry),
	}
	if o.segmentLocks {
		s.segLocks = lockClient(rdb, o.lockAck(lock.WithPrefix(o.keys.Prefix+"seg"))...)
		if o.retry == (strategy.RetryPolicy{}) {
			s.retrier = strategy.NewRetrier(segmentLocksRetry)
		}
	}
	return s
}

// Retries returns the number of attempts retried so far (lost races, busy
// locks).
func (s *Segmented) Retries() int64 { return s.retrier.Retries() }

// segment names segment i of sku as a SKU of its own, "sku#i", whose keys
// get their own hash tag. (The suffix is read from the right, so no two
// SKUs share a segment name.)
func segment(sku string, i int) string { return sku + "#" + strconv.Itoa(i) }

func (s *Segmented) segKey(sku string, i int) string {
	return s.keys.Name("segstock", segment(sku, i))
}

func (s *Segmented) holdKey(sku string, i int, gather string) string {
	return s.keys.Name("seghold", segment(sku, i)) + ":" + gather
}

func (s *Segmented) metaKey(sku string) string { return s.keys.Name("segmeta", sku) }

// Decrement takes qty units of sku, all or none. It returns nil or an error
// wrapping:
//   - stockguard.ErrInvalidRequest: bad sku or qty, checked before any
//     I/O;
//   - the context's error: ctx ended before anything was sent;
//   - stockguard.ErrUnknownSKU: sku was never stocked (nothing is created),
//     or one of its keys holds something else (then also stockguard.ErrCorruptStock);
//   - stockguard.ErrInsufficientStock: fewer than qty units were left in
//     all segments together (see Segmented for how that is established);
//   - stockguard.ErrContention: the retry policy ran out while requests
//     raced for the same units or the gather lock, or Redis was
//     unreachable or refused a command; nothing was taken;
//   - stockguard.ErrOutcomeUnknown: a take's or a gather's commit reply was
//     lost; it may have been applied (all of it or none).
func (s *Segmented) Decrement(ctx context.Context, sku string, qty int64) error {
	if err := strategy.Validate(sku, qty); err != nil {
		return err
	}
	if err := strategy.Canceled(ctx); err != nil {
		return err
	}
	if s.segLocks != nil {
		return s.retrier.Do(ctx, func(ctx context.Context) error { return s.decrementLocked(ctx, sku, qty) })
	}
	// One random segment first: the common case, one round trip.
	if err := s.take(ctx, sku, rand.IntN(s.n), qty); !errors.Is(err, errSegmentShort) {
		return err
	}
	return s.retrier.Do(ctx, func(ctx context.Context) error { return s.slow(ctx, sku, qty) })
}

// errSegmentShort: the segment lacks the units (or does not exist), which
// proves nothing about the SKU.
var errSegmentShort = errors.New("redislock: segment short of units (or gone)")

// take takes qty units from segment i of sku with one script. It returns
// nil, errSegmentShort, or a contract error.
func (s *Segmented) take(ctx context.Context, sku string, i int, qty int64) error {
	key := s.segKey(sku, i)
	left, err := atomicScript.Run(ctx, s.once, []string{key}, qty).Int64()
	return taken(ctx, sku, key, left, err)
}

// taken maps the reply of the take script on segment key of sku: nil,
// errSegmentShort, or a contract error.
func taken(ctx context.Context, sku, key string, left int64, err error) error {
	switch {
	case err != nil:
		return errtext.Wrap(redisx.Classify(ctx, err, redisx.Write), "redislock: decrement %q", sku)
	case left == -3:
		return redisx.Corrupt(key, "holds no stock level")
	case left < 0:
		return errSegmentShort
	}
	return nil
}

// slow serves a request the first segment could not: from another segment,
// by a gather, or with ErrInsufficientStock. It asks for a retry when it
// lost a race.
func (s *Segmented) slow(ctx context.Context, sku string, qty int64) error {
	before, err := s.readMeta(ctx, sku)
	if err != nil {
		return err
	}
	levels, err := s.readLevels(ctx, sku, before.n)
	if err != nil {
		return err
	}
	if err := s.takeFitting(ctx, sku, qty, levels); !errors.Is(err, errNoFit) {
		return err
	}
	if sum(levels) < qty {
		after, err := s.readMeta(ctx, sku)
		if err != nil {
			return err
		}
		if before.quiet() && after.quiet() && before.fence == after.fence && before.n == after.n {
			return errtext.Insufficient(sku, errtext.Unknown, qty)
		}
	}
	return s.gatherTake(ctx, sku, qty)
}

// errNoFit: no segment holds qty units.
var errNoFit = errors.New("redislock: no segment fits")

// takeFitting takes qty units from a random one of the segments whose level
// was at least qty. It returns errNoFit when there is none, a Retry when
// the segment had been emptied meanwhile or its lock was busy.
func (s *Segmented) takeFitting(ctx context.Context, sku string, qty int64, levels []int64) error {
	var fit []int
	for i, v := range levels {
		if v >= qty {
			fit = append(fit, i)
		}
	}
	if len(fit) == 0 {
		return errNoFit
	}
	i := fit[rand.IntN(len(fit))]
	var err error
	if s.segLocks != nil {
		err = s.takeLocked(ctx, sku, i, qty)
	} else {
		err = s.take(ctx, sku, i, qty)
	}
	if errors.Is(err, errSegmentShort) || errors.Is(err, errSegmentBusy) {
		return strategy.Retry(errtext.Wrap(err, "redislock: segment %d of %q", i, sku))
	}
	return err
}

func sum(levels []int64) int64 {
	var t int64
	for _, v := range levels {
		t += v // at most MaxSegments × MaxQty < 2^63
	}
	return t
}

// meta is what the SKU's meta slot says.
type meta struct {
	n       int               // segments
	gathers map[string]string // gather id → "p" pending or "a" aborted
	locked  bool              // the gather lock is held
	fence   string            // the gather lock's fencing counter: gathers begun
}

// quiet reports that no gather was running or unfinished.
func (m meta) quiet() bool { return !m.locked && len(m.gathers) == 0 }

// readMeta reads sku's meta hash, gather lock and gather counter, in one
// round trip to the SKU's slot.
func (s *Segmented) readMeta(ctx context.Context, sku string) (meta, error) {
	key := s.metaKey(sku)
	var (
		all   *redis.MapStringStringCmd
		held  *redis.IntCmd
		fence *redis.StringCmd
	)
	_, _ = s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		all = p.HGetAll(ctx, key)
		held = p.Exists(ctx, s.gather.LockKey(sku))
		fence = p.Get(ctx, s.gather.FenceKey(sku))
		return nil
	})
	switch err := cmp.Or(all.Err(), held.Err(), fenceErr(fence.Err())); {
	case redisx.IsWrongType(err):
		return meta{}, redisx.Corrupt(key, "is not a segment hash")
	case err != nil:
		return meta{}, errtext.Wrap(redisx.Classify(ctx, err, redisx.Read), "redislock: read %q", sku)
	}
	m := meta{gathers: map[string]string{}, locked: held.Val() > 0, fence: fence.Val()}
	for f, v := range all.Val() {
		if id, ok := strings.CutPrefix(f, "g:"); ok {
			m.gathers[id] = v
		}
	}
	raw, ok := all.Val()["n"]
	if !ok {
		return meta{}, errtext.UnknownSKU(sku)
	}
	n, err := strconv.Atoi(raw)
	if err != nil || n < 1 || n > MaxSegments {
		return meta{}, redisx.Corrupt(key, fmt.Sprintf("holds segment count %q", raw))
	}
	m.n = n
	return m, nil
}

// fenceErr drops the redis.Nil of a gather counter that does not exist yet.
func fenceErr(err error) error {
	if errors.Is(err, redis.Nil) {
		return nil
	}
	return err
}

// readLevels reads the levels of sku's n segments in one pipeline (one
// round trip per master). A missing segment means SetStock changed the
// count meanwhile: a Retry.
func (s *Segmented) readLevels(ctx context.Context, sku string, n int) ([]int64, error) {
	keys := make([]string, n)
	cmds := make([]*redis.StringCmd, n)
	_, _ = s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i := range cmds {
			keys[i] = s.segKey(sku, i)
			cmds[i] = p.Get(ctx, keys[i])
		}
		return nil
	})
	levels := make([]int64, n)
	for i, c := range cmds {
		key := keys[i]
		switch err := c.Err(); {
		case errors.Is(err, redis.Nil):
			return nil, strategy.Retry(fmt.Errorf("redislock: segment %d of %q is missing", i, sku))
		case redisx.IsWrongType(err):
			return nil, redisx.Corrupt(key, "is not a string")
		case err != nil:
			return nil, errtext.Wrap(redisx.Classify(ctx, err, redisx.Read), "redislock: read %q", sku)
		}
		v, err := redisx.ParseLevel(key, c.Val())
		if err != nil {
			return nil, err
		}
		levels[i] = v
	}
	return levels, nil
}

// locked runs fn holding sku's gather lock; a busy lock asks for a retry.
func (s *Segmented) locked(ctx context.Context, sku string, fn func(*lock.Lock) error) error {
	return withLock(ctx, sku, s.lease, s.obtainGather, releaseLock, fn)
}

// obtainGather takes sku's gather lock in one attempt.
func (s *Segmented) obtainGather(ctx context.Context, sku string, ttl time.Duration) (*lock.Lock, error) {
	return s.gather.Obtain(ctx, sku, ttl)
}

// releaseLock releases l; a failure leaves it to expire.
func releaseLock(ctx context.Context, l *lock.Lock) { _ = l.Release(ctx) }

// gatherTake serves qty units of sku under the gather lock: from one
// segment if one has them by now, else by a gather.
func (s *Segmented) gatherTake(ctx context.Context, sku string, qty int64) error {
	return s.locked(ctx, sku, func(l *lock.Lock) error {
		m, err := s.readMeta(ctx, sku)
		if err != nil {
			return err
		}
		if err := s.recover(ctx, sku, m); err != nil {
			return err
		}
		levels, err := s.readLevels(ctx, sku, m.n)
		if err != nil {
			return err
		}
		if sum(levels) < qty {
			// No other gather holds units, and segments only shrink
			// meanwhile: the stock is short.
			return errtext.Insufficient(sku, sum(levels), qty)
		}
		if err := s.takeFitting(ctx, sku, qty, levels); !errors.Is(err, errNoFit) {
			return err
		}
		return s.gatherPieces(ctx, l, sku, qty, levels)
	})
}

// gatherPieces takes qty units of sku in pieces from the segments, fullest
// first, and commits them as one (see Segmented). l is the gather lock.
func (s *Segmented) gatherPieces(ctx context.Context, l *lock.Lock, sku string, qty int64, levels []int64) error {
	id := crand.Text() // names the gather's record and holds
	field := "g:" + id
	metaKey := s.metaKey(sku)
	begin := redis.NewIntCmd(ctx, "hset", metaKey, field, "p")
	if err := s.w.Process(ctx, redisx.Once(begin)); err != nil {
		// Nothing is held yet; a record that was written after all is
		// removed by the next gather.
		return errtext.Wrap(redisx.Classify(ctx, err, redisx.Read), "redislock: gather %q", sku)
	}
	order := make([]int, 0, len(levels))
	for i, v := range levels {
		if v > 0 {
			order = append(order, i)
		}
	}
	slices.SortFunc(order, func(a, b int) int { return cmp.Compare(levels[b], levels[a]) })

	need := qty
	var touched []int // segments a piece was sent to
	var failed error
	for _, i := range order {
		if need == 0 {
			break
		}
		if !l.Valid() {
			failed = strategy.Retry(fmt.Errorf("%w: the gather lock of %q ran out", lock.ErrNotHeld, sku))
			break
		}
		touched = append(touched, i)
		key := s.segKey(sku, i)
		// A resend returns the hold the first run recorded: safe to resend.
		got, err := segmentedTakeScript.Run(ctx, s.w, []string{key, s.holdKey(sku, i, id)}, need, holdTTL.Milliseconds()).Int64()
		switch {
		case err != nil:
			failed = errtext.Wrap(redisx.Classify(ctx, err, redisx.Read), "redislock: gather %q", sku)
		case got == -3:
			failed = redisx.Corrupt(key, "holds no stock level")
		case got < 0:
			failed = strategy.Retry(fmt.Errorf("redislock: segment %d of %q is missing", i, sku))
		default:
			need -= got
			continue
		}
		break
	}
	if failed == nil && need > 0 {
		// Every segment that had units was emptied by this gather, and no
		// other gather holds any: the stock is short.
		failed = errtext.Insufficient(sku, qty-need, qty)
	}
	if failed == nil {
		decided, err := segmentedDecideScript.Run(ctx, s.once, []string{metaKey}, field, "c").Int64()
		switch {
		case err == nil && decided == 1:
			s.dropHolds(ctx, sku, id, touched)
			return nil
		case err != nil && !redisx.NotSent(err): // sent at most once: not sent means not applied
			return fmt.Errorf("%w: redislock: the commit of a gather of %q was sent but not confirmed: "+
				"committed if record %q is gone from %q, else the next gather rolls it back: %v",
				stockguard.ErrOutcomeUnknown, sku, field, metaKey, err)
		case err != nil:
			failed = errtext.Wrap(redisx.Classify(ctx, err, redisx.Read), "redislock: gather %q", sku)
		default:
			failed = strategy.Retry(fmt.Errorf("redislock: a gather of %q was rolled back by another (its lock ran out)", sku))
		}
	}
	s.rollback(ctx, sku, field, id, touched)
	return failed
}

// rollback aborts the gather id of sku (its record field), gives back what
// it holds in the segments touched and drops its record. Whatever fails is
// left to the next gather's recovery: the record stays until every piece is
// back.
func (s *Segmented) rollback(ctx context.Context, sku, field, id string, touched []int) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.lease)
	defer cancel()
	metaKey := s.metaKey(sku)
	// Marked aborted, the gather can no longer commit; unmarked (Redis
	// failed), it stays pending, and only its owner — this call — commits.
	// Either way the pieces may go back now.
	_, err := segmentedDecideScript.Run(ctx, s.w, []string{metaKey}, field, "a").Int64()
	if s.giveBack(ctx, sku, id, touched) == nil && err == nil {
		_ = s.w.Process(ctx, redis.NewIntCmd(ctx, "hdel", metaKey, field))
	}
}

// giveBack returns what gather id holds in the segments of sku listed.
func (s *Segmented) giveBack(ctx context.Context, sku, id string, segments []int) error {
	var errs []error
	for _, i := range segments {
		keys := []string{s.segKey(sku, i), s.holdKey(sku, i, id)}
		// Safe to resend: the hold goes with the units.
		errs = append(errs, segmentedReturnScript.Run(ctx, s.w, keys).Err())
	}
	return errors.Join(errs...)
}

// dropHolds deletes a committed gather's hold records; left behind, they
// only expire.
func (s *Segmented) dropHolds(ctx context.Context, sku, id string, segments []int) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.lease)
	defer cancel()
	_, _ = s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for _, i := range segments {
			p.Del(ctx, s.holdKey(sku, i, id))
		}
		return nil
	})
}

// recover rolls back the gathers recorded in m, which no longer hold the
// lock (the caller does): pending ones are marked aborted first, so their
// owners can no longer commit, then their pieces go back to every segment.
func (s *Segmented) recover(ctx context.Context, sku string, m meta) error {
	metaKey := s.metaKey(sku)
	every := make([]int, m.n)
	for i := range every {
		every[i] = i
	}
	for id, state := range m.gathers {
		field := "g:" + id
		if state == "p" {
			decided, err := segmentedDecideScript.Run(ctx, s.w, []string{metaKey}, field, "a").Int64()
			switch {
			case err != nil:
				return errtext.Wrap(redisx.Classify(ctx, err, redisx.Read), "redislock: recover a gather of %q", sku)
			case decided < 0:
				continue // it committed meanwhile
			}
		}
		if err := s.giveBack(ctx, sku, id, every); err != nil {
			return errtext.Wrap(redisx.Classify(ctx, err, redisx.Read), "redislock: recover a gather of %q", sku)
		}
		if err := s.w.Process(ctx, redis.NewIntCmd(ctx, "hdel", metaKey, field)); err != nil {
			return errtext.Wrap(redisx.Classify(ctx, err, redisx.Read), "redislock: recover a gather of %q", sku)
		}
	}
	return nil
}

// SetStock stocks sku with qty units (0…stockguard.MaxQty), spread evenly
// over the configured number of segments (the first qty mod n segments get
// one more), replacing whatever sku held, in any number of segments. It runs
// under the SKU's gather lock, after rolling back unfinished gathers; see
// Segmented for what it does not make atomic. It returns nil or an error
// wrapping stockguard.ErrInvalidRequest (before any I/O), the context's
// error, stockguard.ErrContention (the gather lock stayed busy through the
// retry policy, or nothing was written) or stockguard.ErrOutcomeUnknown
// (some segments may have been written: call it again).
func (s *Segmented) SetStock(ctx context.Context, sku string, qty int64) error {
	if err := strategy.ValidateSet(sku, qty); err != nil {
		return err
	}
	if err := strategy.Canceled(ctx); err != nil {
		return err
	}
	return s.retrier.Do(ctx, func(ctx context.Context) error {
		return s.locked(ctx, sku, func(l *lock.Lock) error {
			old := 0
			m, err := s.readMeta(ctx, sku)
			switch {
			case err == nil:
				old = m.n
				if err := s.recover(ctx, sku, m); err != nil {
					return err
				}
			case errors.Is(err, stockguard.ErrCorruptStock):
				// Overwritten like a corrupt stock key: the meta goes (and
				// with it the count of segments to delete, if it had one).
				del := redis.NewIntCmd(ctx, "del", s.metaKey(sku))
				if err := s.w.Process(ctx, redisx.Once(del)); err != nil {
					return errtext.Wrap(redisx.Classify(ctx, err, redisx.Write), "redislock: set stock of %q", sku)
				}
			case !errors.Is(err, stockguard.ErrUnknownSKU):
				return err
			}
			if !l.Valid() {
				return strategy.Retry(fmt.Errorf("%w: the gather lock of %q ran out", lock.ErrNotHeld, sku))
			}
			return s.write(ctx, sku, qty, old)
		})
	})
}

// write stores qty spread over s.n segments, deletes segments old
// configurations left beyond them, and then records the count: a SKU is
// known only once its segments exist.
func (s *Segmented) write(ctx context.Context, sku string, qty int64, old int) error {
	n := int64(s.n)
	var cmds []redis.Cmder
	for i := range s.n {
		level := qty / n
		if int64(i) < qty%n {
			level++
		}
		cmds = append(cmds, redisx.Once(redis.NewStatusCmd(ctx, "set", s.segKey(sku, i), level)))
	}
	for i := s.n; i < old; i++ {
		cmds = append(cmds, redisx.Once(redis.NewIntCmd(ctx, "del", s.segKey(sku, i))))
	}
	var errs []error
	if s.acked {
		// Each write with its own WAIT, on the node that took it: a
		// cluster pipeline would spread them over nodes no WAIT follows.
		for _, c := range cmds {
			errs = append(errs, s.w.Process(ctx, c))
		}
	} else {
		_, _ = s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
			for _, c := range cmds {
				_ = p.Process(ctx, c)
			}
			return nil
		})
		for _, c := range cmds {
			errs = append(errs, c.Err())
		}
	}
	if err := errors.Join(errs...); err != nil {
		return errtext.Wrap(redisx.Classify(ctx, err, redisx.Write), "redislock: set stock of %q", sku)
	}
	set := redis.NewIntCmd(ctx, "hset", s.metaKey(sku), "n", s.n)
	if err := s.w.Process(ctx, redisx.Once(set)); err != nil {
		return errtext.Wrap(redisx.Classify(ctx, err, redisx.Write), "redislock: set stock of %q", sku)
	}
	return nil
}

// Stock returns the units of sku left: the sum of its segments, read
// between two quiet reads of its meta slot (see Segmented), retried under
// the retry policy while gathers or SetStock run. Its errors wrap
// stockguard.ErrInvalidRequest (before any I/O), the context's error,
// stockguard.ErrUnknownSKU (with stockguard.ErrCorruptStock: a key holding something
// else), stockguard.ErrUnavailable (a read failed) or
// stockguard.ErrContention (the SKU never was quiet).
func (s *Segmented) Stock(ctx context.Context, sku string) (int64, error) {
	if err := strategy.ValidateSKU(sku); err != nil {
		return 0, err
	}
	if err := strategy.Canceled(ctx); err != nil {
		return 0, err
	}
	var total int64
	err := s.retrier.Do(ctx, func(ctx context.Context) error {
		before, err := s.readMeta(ctx, sku)
		if err != nil {
			return err
		}
		levels, err := s.readLevels(ctx, sku, before.n)
		if err != nil {
			return err
		}
		after, err := s.readMeta(ctx, sku)
		if err != nil {
			return err
		}
		if before.locked || after.locked || before.fence != after.fence || before.n != after.n {
			return strategy.Retry(fmt.Errorf("redislock: %q changed while it was read", sku))
		}
		total = sum(levels)
		return nil
	})
	return total, err
}

// lockClient is lock.New for options built from options that passed already:
// a valid prefix and ack cannot be refused.
func lockClient(rdb lock.RedisClient, opts ...lock.Option) *lock.Client {
	c, err := lock.New(rdb, opts...)
	if err != nil {
		panic(err)
	}
	return c
}
