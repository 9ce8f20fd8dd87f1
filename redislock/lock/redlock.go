package lock

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stockguard/stockguard"
	"github.com/stockguard/stockguard/internal/rediskeys"
	"github.com/stockguard/stockguard/internal/redisx"
	"github.com/stockguard/stockguard/strategy"
)

// DefaultNodeTimeout caps how long a Redlock waits for one master's reply
// unless WithNodeTimeout says otherwise (see there).
const DefaultNodeTimeout = 50 * time.Millisecond

// Defaults of WithDrift: antirez's reference implementation allows 1% of
// the ttl for clock drift between the masters, plus 2ms for the
// granularity of Redis's expiry clock.
const (
	DefaultDriftFactor = 0.01
	DefaultDriftFixed  = 2 * time.Millisecond
)

// ErrExpired is wrapped by the errors of a QuorumLock whose validity had run
// out (by this process's clock) when it was released or refreshed: the
// holder cannot know that it was alone for all of its critical section.
// It wraps ErrNotHeld.
var ErrExpired = fmt.Errorf("%w: its validity ran out", ErrNotHeld)

// WithNodeTimeout bounds how long NewRedlock's Obtain, Release and Refresh
// wait for each master: a master that has not answered by then counts as
// failed for this round, and its call finishes in the background (a lock it
// sets late is deleted once it answers). It must be positive, and much
// smaller than the ttl, which it eats into. Default: DefaultNodeTimeout, or
// a tenth of the ttl when that is smaller (at least 1ms).
func WithNodeTimeout(d time.Duration) Option {
	return func(o *options) {
		o.given |= optNodeTimeout
		if d <= 0 {
			o.fail(fmt.Errorf("node timeout %v is not positive", d))
			return
		}
		o.nodeTimeout = d
	}
}

// drift is a clock drift allowance: factor × ttl + fixed.
type drift struct {
	factor float64
	fixed  time.Duration
}

// WithDrift sets the clock drift NewRedlock allows for: a lock obtained
// with ttl is valid for ttl − (time to obtain) − (factor × ttl + fixed).
// factor must lie in [0, 1) and fixed must not be negative. Defaults
// DefaultDriftFactor and DefaultDriftFixed.
func WithDrift(factor float64, fixed time.Duration) Option {
	return func(o *options) {
		o.given |= optDrift
		if !(factor >= 0 && factor < 1) || fixed < 0 { // !(…) catches NaN
			o.fail(fmt.Errorf("drift %v × ttl + %v: want a factor in [0, 1) and a fixed part ≥ 0", factor, fixed))
			return
		}
		o.drift = drift{factor: factor, fixed: fixed}
	}
}

// Redlock obtains locks over N independent Redis masters with the Redlock
// algorithm: a lock is set on every master at once (SET NX PX with a random
// owner token, as Client does), granted when a majority (N/2+1) set it, and
// valid for ttl − (time to obtain) − (clock drift allowance). It survives
// the loss of a minority of the masters, which a single-master lock (Client)
// does not: if its master dies, and a replica without the lock is promoted,
// two holders can coexist.
//
// # Fencing, and what to use instead
//
// A Redlock issues no fencing tokens, and cannot be made to. Martin
// Kleppmann ("How to do distributed locking", 2016) showed that Redlock's
// exclusion rests on timing: a holder that is paused (GC, swapping,
// SIGSTOP) or whose messages are delayed past the validity, or masters whose
// clocks jump, let a second holder in while the first still believes it
// holds the lock. Only the resource can refuse the late holder, and for
// that it needs a token that grows with each grant. Independent masters have
// no agreed order of grants to derive one from: a counter on each master
// moves separately (failed attempts bump some of them, a restarted master
// starts over), so the highest of a majority's counters need not grow from
// one holder to the next — making it grow would take consensus, which is
// not what Redlock is. When correctness matters, use the single-master lock
// (Client.Obtain) and pass its Lock.Token to a resource that checks it —
// redislock.Store.WriteFenced, mysqllock.NewFencedStore, or
// redislock.NewGuarded, which does both. Redlock is for efficiency: to keep work from being done twice,
// where an occasional double grant costs time, not correctness.
//
// Masters must be independent (not replicas of each other, not one server
// twice). One that restarts empty, without its data, can grant a lock
// another holder still has there; keep a crashed master down for longer
// than the longest ttl before it rejoins, or persist with fsync always.
//
// A Redlock is safe for concurrent use.
type Redlock struct {
	nodes   []*Client
	keys    rediskeys.Keys
	quorum  int
	timeout time.Duration // 0: derived from the ttl
	drift   drift
}

// NewRedlock returns a Redlock over the independent masters clients (at
// least one; an odd number, usually 5, tolerates the most failures per
// master). It reads the options WithPrefix (key names as for New),
// WithNodeTimeout, WithDrift, WithReplicaAck and WithAOFAck (each master's
// vote counts only once its replicas confirm it: give WithNodeTimeout
// room for the ack's timeout). Without masters, or with an invalid
// option, it returns an error wrapping stockguard.ErrInvalidRequest.
func NewRedlock(clients []redis.UniversalClient, opts ...Option) (*Redlock, error) {
	o := newOptions(opts)
	o.only("NewRedlock", readsRedlock)
	if o.err != nil {
		return nil, o.err
	}
	if len(clients) == 0 {
		return nil, invalid(errors.New("NewRedlock without masters"))
	}
	r := &Redlock{
		nodes:   make([]*Client, len(clients)),
		keys:    o.keys,
		quorum:  len(clients)/2 + 1,
		timeout: o.nodeTimeout,
		drift:   o.drift,
	}
	for i, c := range clients {
		r.nodes[i] = newClient(c, o)
	}
	return r, nil
}

// Quorum returns the number of masters that must agree: N/2+1.
func (r *Redlock) Quorum() int { return r.quorum }

// nodeTimeout returns the per-master timeout for a lock of ttl.
func (r *Redlock) nodeTimeout(ttl time.Duration) time.Duration {
	if r.timeout > 0 {
		return r.timeout
	}
	return min(DefaultNodeTimeout, max(ttl/10, time.Millisecond))
}

// validFor returns the end of the validity of a lease of ttl set by
// commands sent at sent.
func (r *Redlock) validFor(sent time.Time, ttl time.Duration) time.Time {
	return sent.Add(ttl - time.Duration(r.drift.factor*float64(ttl)) - r.drift.fixed)
}

// LockKey returns the Redis key of the lock on key, the same on every
// master: "<prefix>lock:{key}". While a handle holds the lock, a master
// that granted it holds the handle's OwnerToken there.
func (r *Redlock) LockKey(key string) string { return r.keys.Lock(key) }

// lockKeys returns the names of key's lock, the same on every master:
// Redlocks issue no fencing tokens, so nothing outlives the lock.
func (r *Redlock) lockKeys(key string) lockKeys { return lockKeys{lock: r.keys.Lock(key)} }

// Obtain takes the lock on key on a majority of the masters for ttl (at
// least 1ms; sub-millisecond parts are dropped) and returns its handle. Of
// the ObtainOptions it accepts Retry only — after a failed round it waits
// as the policy says (a random delay, which a stockguard.RetryPolicy is,
// keeps contenders from splitting the votes again) — and refuses the others:
// Notify, Watchdog, MaxHold, Reentrant, NoFence (a Redlock is never fenced)
// and IfExists need a single master.
//
// A round sends the lock to every master at once and ends as soon as a
// majority has set it, a majority can no longer be reached, or the node
// timeout passes. A failed round deletes the lock from every master that
// set it or may have (an error or no reply: a reply lost after the SET),
// also from masters that answer after the round. It returns the handle or
// an error:
//   - one wrapping stockguard.ErrInvalidRequest: ttl below 1ms, or an
//     invalid or unsupported option; nothing sent;
//   - the context's error: ctx ended before the first round;
//   - ErrNotObtained: the rounds allowed by the retry strategy all failed —
//     the lock is held elsewhere, too many masters failed (their errors are
//     joined), or obtaining took so long that no validity was left; joined
//     with ctx's error when ctx ended meanwhile. It also wraps
//     stockguard.ErrUnavailable when a master failed or did not answer in
//     the last round.
func (r *Redlock) Obtain(ctx context.Context, key string, ttl time.Duration, opts ...ObtainOption) (*QuorumLock, error) {
	o, ttl, err := obtainSetup(ttl, opts)
	switch {
	case err != nil:
		return nil, err
	case o.notify || o.watchdog || o.reentrant || o.unfenced || o.exists != "":
		return nil, fmt.Errorf("%w: redislock: Redlock supports no Notify, Watchdog, MaxHold, Reentrant, NoFence or IfExists", stockguard.ErrInvalidRequest)
	}
	if err := strategy.Canceled(ctx); err != nil {
		return nil, err
	}
	retry := o.retry
	if retry == nil {
		retry = noRetry{}
	}
	var timer *time.Timer
	defer func() {
		if timer != nil {
			timer.Stop()
		}
	}()
	for attempt := 1; ; attempt++ {
		l, err := r.round(ctx, key, newToken(), ttl)
		if err == nil {
			return l, nil
		}
		err = fmt.Errorf("%w: %q (%d rounds): %w", ErrNotObtained, key, attempt, err)
		if cerr := strategy.Canceled(ctx); cerr != nil {
			return nil, errors.Join(err, cerr)
		}
		d, ok := retry.Backoff(attempt)
		if !ok {
			return nil, err
		}
		if timer == nil {
			timer = time.NewTimer(d)
		} else {
			timer.Reset(d)
		}
		select {
		case <-ctx.Done():
			return nil, errors.Join(err, strategy.Canceled(ctx))
		case <-timer.C:
		}
	}
}

// round makes one attempt on every master.
func (r *Redlock) round(ctx context.Context, key, owner string, ttl time.Duration) (*QuorumLock, error) {
	n := len(r.nodes)
	k := r.lockKeys(key)
	sent := time.Now()
	calls := r.fanout(ctx, r.nodeTimeout(ttl), nil, func(ctx context.Context, i int) (bool, error) {
		obtained, _, _, err := r.nodes[i].attempt(ctx, k, owner, ttl, false)
		return obtained, err
	}, func(ok, failed int) bool { return ok >= r.quorum || failed > n-r.quorum })
	l := &QuorumLock{r: r, key: key, keys: k, owner: owner, obtains: calls, ttl: ttl, validUntil: r.validFor(sent, ttl)}
	t := tally(calls)
	if t.ok >= r.quorum && time.Now().Before(l.validUntil) {
		return l, nil
	}
	// Clean up on a context of its own: the caller's may be what ended the
	// round.
	l.releaseAll(context.WithoutCancel(ctx), false)
	if t.ok >= r.quorum {
		return nil, fmt.Errorf("set on %d of %d masters, but obtaining took %v of the %v ttl", t.ok, n, time.Since(sent).Round(time.Millisecond), ttl)
	}
	// The round ended once the refusal was certain; wait for the rest
	// (bounded by the node timeout, as the round was) to tell a refusal by
	// holders from one by masters that failed.
	awaitAll(calls, sent.Add(r.nodeTimeout(ttl)))
	t = tally(calls)
	err := t.err(fmt.Sprintf("set on %d of %d masters, %d needed", t.ok, n, r.quorum))
	if t.unanswered > 0 || len(t.errs) > 0 {
		// With a master lost, the survivors' split votes refuse everyone:
		// the refusal is the outage's, not a holder's.
		err = fmt.Errorf("%w: %w", stockguard.ErrUnavailable, err)
	}
	return nil, err
}

// nodeCall is one command to one master. done is closed when it has
// returned; ok and err are set before that.
type nodeCall struct {
	done chan struct{}
	ok   bool
	err  error
}

// answered reports whether the call has returned.
func (c *nodeCall) answered() bool {
	select {
	case <-c.done:
		return true
	default:
		return false
	}
}

// fanout runs op on every master i for which send is nil or send[i] is
// true, all at once, and waits until decided(ok, failed) reports the
// outcome settled, every call has returned, ctx ends or timeout passes.
// Calls still running then go on in the background (their context ends
// at the timeout, though go-redis bounds socket I/O by its own timeouts
// unless the client has ContextTimeoutEnabled). decided may be nil: wait for
// all. calls[i] is nil for a master not sent to.
func (r *Redlock) fanout(ctx context.Context, timeout time.Duration, send []bool,
	op func(ctx context.Context, i int) (bool, error), decided func(ok, failed int) bool) []*nodeCall {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	calls := make([]*nodeCall, len(r.nodes))
	replies := make(chan *nodeCall, len(r.nodes))
	var wg sync.WaitGroup
	for i := range r.nodes {
		if send != nil && !send[i] {
			continue
		}
		c := &nodeCall{done: make(chan struct{})}
		calls[i] = c
		wg.Go(func() {
			c.ok, c.err = op(ctx, i)
			close(c.done)
			replies <- c
		})
	}
	sent := 0
	for _, c := range calls {
		if c != nil {
			sent++
		}
	}
	received, ok, failed := 0, 0, 0
wait:
	for received < sent {
		select {
		case c := <-replies:
			received++
			if c.ok {
				ok++
			} else {
				failed++
			}
			if decided != nil && decided(ok, failed) {
				break wait
			}
		case <-ctx.Done():
			break wait
		}
	}
	if received == sent {
		cancel()
	} else {
		go func() { wg.Wait(); cancel() }()
	}
	return calls
}

// awaitAll waits until every call has returned or deadline passes.
func awaitAll(calls []*nodeCall, deadline time.Time) {
	timer := time.NewTimer(time.Until(deadline))
	defer timer.Stop()
	for _, c := range calls {
		if c == nil {
			continue
		}
		select {
		case <-c.done:
		case <-timer.C:
			return
		}
	}
}

// callTally counts the calls of a fanout that have returned; those that
// answered no are counted nowhere.
type callTally struct {
	ok, unanswered int
	errs           []error
}

func tally(calls []*nodeCall) callTally {
	var t callTally
	for _, c := range calls {
		switch {
		case c == nil:
		case !c.answered():
			t.unanswered++
		case c.err != nil:
			t.errs = append(t.errs, c.err)
		case c.ok:
			t.ok++
		}
	}
	return t
}

// err describes a failed fanout: what, then the masters' errors.
func (t callTally) err(what string) error {
	if t.unanswered > 0 {
		what += fmt.Sprintf(", %d did not answer in time", t.unanswered)
	}
	return errors.Join(append([]error{errors.New(what)}, t.errs...)...)
}

// QuorumLock is the handle of a lock obtained by a Redlock. Unlike Lock, it
// has no fencing token (see Redlock for why) and no watchdog; its validity
// is what the algorithm guarantees, measured by this process's clock from
// before the command that set it: ValidUntil. Past that instant the lock
// may be held by someone else, and Release and Refresh report ErrExpired.
// A QuorumLock is safe for concurrent use.
type QuorumLock struct {
	r       *Redlock
	key     string
	keys    lockKeys // the same on every master
	owner   string
	obtains []*nodeCall // per master: the obtain call

	mu         sync.Mutex
	ttl        time.Duration
	validUntil time.Time
	released   bool
	lost       error // not nil once Refresh found the lock gone
}

// Key returns the key passed to Obtain.
func (l *QuorumLock) Key() string { return l.key }

// OwnerToken returns the random token that identifies this handle in
// Redis: every master that granted the lock holds it in Redlock.LockKey, so
// a script on one of them can write only while that master's copy of the
// lock is this handle's (see redislock.NewRedlockGuarded).
func (l *QuorumLock) OwnerToken() string { return l.owner }

// GrantedBy reports whether master i (an index into NewRedlock's clients)
// set the lock, waiting for its answer at most until ctx ends or the
// lock's validity runs out: Obtain returns as soon as a quorum has set it,
// and the others may still be answering.
func (l *QuorumLock) GrantedBy(ctx context.Context, i int) bool {
	if i < 0 || i >= len(l.obtains) {
		return false
	}
	c := l.obtains[i]
	if c.answered() {
		return c.ok
	}
	t := time.NewTimer(time.Until(l.ValidUntil()))
	defer t.Stop()
	select {
	case <-c.done:
		return c.ok
	case <-ctx.Done():
	case <-t.C:
	}
	return false
}

// ValidUntil returns the end of the lock's validity, by this process's
// clock: the instant the last successful Obtain or Refresh was sent plus its
// ttl, minus the drift allowance.
func (l *QuorumLock) ValidUntil() time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.validUntil
}

// Valid reports whether the handle still holds the lock by its own
// reckoning: not released, not found lost, and its validity not run out.
func (l *QuorumLock) Valid() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return !l.released && l.lost == nil && time.Now().Before(l.validUntil)
}

// holders sorts the masters by what their obtain call did: granted ones
// set the lock; maybe ones failed after the SET may have been applied (a
// lost reply) or have not answered yet.
func (l *QuorumLock) holders() (granted, maybe []bool) {
	granted = make([]bool, len(l.obtains))
	maybe = make([]bool, len(l.obtains))
	for i, c := range l.obtains {
		switch {
		case c == nil:
		case !c.answered():
			maybe[i] = true
		case c.ok:
			granted[i] = true
		case c.err != nil && mayHaveSent(c.err):
			maybe[i] = true
		}
	}
	return granted, maybe
}

// mayHaveSent reports whether a failed command may have reached the
// server: anything but a refused dial or a pool error (a context error
// may come from go-redis's backoff after a send whose reply was lost).
func mayHaveSent(err error) bool {
	return !redisx.NotSent(err) || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)
}

// releaseAll deletes the lock from every master that may hold it and
// returns the delete calls it waited for (up to the node timeout): those to
// the masters that granted it and, when wait is set, to those whose obtain
// has not answered yet — a delete is sent right after such an answer, since
// one sent on another connection could overtake the late SET. Masters whose
// obtain failed after it may have been sent are likely down; they, and
// every master not waited for, are released in the background.
func (l *QuorumLock) releaseAll(ctx context.Context, wait bool) []*nodeCall {
	r := l.r
	send := make([]bool, len(l.obtains))
	for i, c := range l.obtains {
		switch {
		case c == nil:
		case !c.answered():
			send[i] = wait
			if !wait {
				l.releaseLater(ctx, i)
			}
		case c.ok:
			send[i] = true
		case c.err != nil && mayHaveSent(c.err):
			l.releaseLater(ctx, i)
		}
	}
	return r.fanout(ctx, r.nodeTimeout(l.ttl), send, func(ctx context.Context, i int) (bool, error) {
		c := l.obtains[i]
		select {
		case <-c.done:
		case <-ctx.Done():
			l.releaseLater(ctx, i)
			return false, ctx.Err()
		}
		if c.ok || c.err != nil && mayHaveSent(c.err) {
			ok, err := l.releaseOn(ctx, i)
			if err != nil {
				// On a loaded machine this goroutine may start after the
				// node timeout, and go-redis then never sends the delete:
				// the lock would sit on that master for its whole ttl. The
				// delete is owner-checked, so sending it again is harmless.
				l.releaseLater(ctx, i)
			}
			return ok, err
		}
		return false, nil // it never set the lock
	}, nil)
}

// releaseLater deletes the lock from master i in the background, once its
// obtain has answered, if it may have set the lock.
func (l *QuorumLock) releaseLater(ctx context.Context, i int) {
	c := l.obtains[i]
	go func() {
		<-c.done
		if c.ok || c.err != nil && mayHaveSent(c.err) {
			ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), l.r.nodeTimeout(l.ttl))
			_, _ = l.releaseOn(ctx, i)
			cancel()
		}
	}()
}

// releaseOn deletes the lock on master i if this handle's owner holds it
// there.
func (l *QuorumLock) releaseOn(ctx context.Context, i int) (bool, error) {
	return l.r.nodes[i].releaseOwned(ctx, l.keys, l.owner, noAnnounce)
}

// Release deletes the lock from every master that may hold it (masters
// still busy with the Obtain are released as soon as they answer). A
// handle is released once; later calls return ErrNotHeld. It returns nil,
// or an error:
//   - the context's error: ctx had ended, nothing was done (Release may be
//     called again);
//   - ErrExpired (which wraps ErrNotHeld): the validity had run out before
//     Release, so the lock may have been someone else's meanwhile; it was
//     deleted wherever it was still this handle's;
//   - ErrNotHeld: the handle was released, or fewer than a quorum of
//     masters held the lock;
//   - any other error is masters failing (joined): fewer than a quorum
//     confirmed the delete; the lock expires at the end of its ttl.
func (l *QuorumLock) Release(ctx context.Context) error {
	if err := strategy.Canceled(ctx); err != nil {
		return err
	}
	l.mu.Lock()
	if l.released {
		l.mu.Unlock()
		return fmt.Errorf("%w: %q was already released", ErrNotHeld, l.key)
	}
	l.released = true
	expired := !time.Now().Before(l.validUntil)
	lost := l.lost
	l.mu.Unlock()

	t := tally(l.releaseAll(ctx, true))
	switch {
	case expired:
		return fmt.Errorf("redislock: release %q: %w", l.key, ErrExpired)
	case lost != nil:
		return lost
	case t.ok >= l.r.quorum:
		return nil
	case t.ok+len(t.errs)+t.unanswered >= l.r.quorum:
		return fmt.Errorf("redislock: release %q: %w", l.key, t.err(fmt.Sprintf("deleted on %d of %d masters, %d needed", t.ok, len(l.r.nodes), l.r.quorum)))
	}
	return fmt.Errorf("%w: %q was held on %d of %d masters, %d needed", ErrNotHeld, l.key, t.ok, len(l.r.nodes), l.r.quorum)
}

// Refresh sets the lock's lease to ttl (at least 1ms) on every master that
// may hold it, if this handle's owner still holds it there; it never
// re-creates a lost lock. It succeeds when a quorum extended the lease in
// time, and the validity then runs from before the refresh was sent. It
// returns nil, or an error:
//   - one wrapping stockguard.ErrInvalidRequest: ttl below 1ms;
//   - the context's error: ctx had ended, nothing was sent;
//   - ErrExpired (which wraps ErrNotHeld): the validity had run out, nothing
//     was sent — obtain a new lock;
//   - ErrNotHeld: the handle was released, or so many masters no longer hold
//     the lock that no quorum can; the handle is then lost for good;
//   - any other error is masters failing or answering too late (joined):
//     the old validity still stands, and Refresh may be tried again.
func (l *QuorumLock) Refresh(ctx context.Context, ttl time.Duration) error {
	ttl, err := leaseTTL(ttl)
	if err != nil {
		return err
	}
	if err := strategy.Canceled(ctx); err != nil {
		return err
	}
	l.mu.Lock()
	switch {
	case l.released:
		l.mu.Unlock()
		return fmt.Errorf("%w: %q was released", ErrNotHeld, l.key)
	case l.lost != nil:
		l.mu.Unlock()
		return l.lost
	case !time.Now().Before(l.validUntil):
		l.mu.Unlock()
		return fmt.Errorf("redislock: refresh %q: %w", l.key, ErrExpired)
	}
	l.mu.Unlock()

	r := l.r
	n := len(r.nodes)
	// Masters that may hold the lock after a failed obtain are asked too:
	// the script extends only the owner's lock.
	send, maybe := l.holders()
	unsent := n
	for i := range send {
		send[i] = send[i] || maybe[i] && l.obtains[i].answered()
		if send[i] {
			unsent--
		}
	}
	sent := time.Now()
	t := tally(r.fanout(ctx, r.nodeTimeout(ttl), send, func(ctx context.Context, i int) (bool, error) {
		v, err := lockRefreshScript.Run(ctx, r.nodes[i].writes, []string{l.keys.lock}, l.owner, ttl.Milliseconds()).Int64()
		return v == 1, err
	}, func(ok, failed int) bool { return ok >= r.quorum || failed+unsent > n-r.quorum }))
	validUntil := r.validFor(sent, ttl)

	l.mu.Lock()
	defer l.mu.Unlock()
	switch {
	case t.ok >= r.quorum && time.Now().Before(validUntil):
		if !l.released && l.lost == nil {
			l.ttl, l.validUntil = ttl, validUntil
		}
		return nil
	case t.ok+len(t.errs)+t.unanswered < r.quorum:
		// Masters answered that the lock is not ours: no quorum is left.
		if l.lost == nil {
			l.lost = fmt.Errorf("%w: %q is held on %d of %d masters, %d needed", ErrNotHeld, l.key, t.ok, n, r.quorum)
		}
		return l.lost
	case t.ok >= r.quorum:
		return fmt.Errorf("redislock: refresh %q: extended on %d of %d masters, but it took %v of the %v ttl", l.key, t.ok, n, time.Since(sent).Round(time.Millisecond), ttl)
	}
	return fmt.Errorf("redislock: refresh %q: %w", l.key, t.err(fmt.Sprintf("extended on %d of %d masters, %d needed", t.ok, n, r.quorum)))
}
