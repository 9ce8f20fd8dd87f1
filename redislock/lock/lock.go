package lock

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/stockguard/stockguard/strategy"
)

// Lock is the handle of an obtained lock. A Lock is safe for concurrent use.
//
// A lease-based lock cannot by itself keep two holders apart: if the holder
// stops for longer than its lease — a GC pause, a swapped-out or SIGSTOPped
// process, a VM migration, a long network delay — the lease runs out, a
// second holder obtains the lock, and the first resumes believing it still
// holds it. A watchdog does not change that: it is frozen with the rest of
// the process, and a check of Context just before a write can pass and
// the process stop right after it. Only the resource can refuse the late
// writer: pass Token to it and let it reject tokens older than the newest
// it has seen (redislock.Store.WriteFenced does exactly that).
type Lock struct {
	c         *Client
	key       string
	keys      lockKeys
	owner     string
	token     int64
	reentrant bool

	mu         sync.Mutex
	ttl        time.Duration // lease set by the last Obtain/Refresh/renewal
	validUntil time.Time     // lease end by this process's clock, measured from before the command that set it
	released   bool          // Release was called (with a live context)
	ended      error         // why the handle no longer holds the lock; nil while it does
	lostErr    error         // the loss, if the lock was lost rather than released
	wd         *watchdog
	// Created on demand by Context and Lost, so that a lock nobody watches
	// costs neither allocations nor a timer.
	ctx    context.Context
	cancel context.CancelCauseFunc
	lost   chan struct{}
	timer  *time.Timer // fires at validUntil
}

func (c *Client) newLock(key string, k lockKeys, owner string, token int64, ttl time.Duration, sent time.Time, o *obtainOptions) *Lock {
	l := &Lock{
		c: c, key: key, keys: k, owner: owner, token: token, reentrant: o.reentrant,
		ttl: ttl, validUntil: sent.Add(ttl),
	}
	if o.watchdog {
		l.wd = l.startWatchdog(sent, o.maxHold)
	}
	return l
}

// Key returns the key passed to Obtain.
func (l *Lock) Key() string { return l.key }

// Token returns the lock's fencing token: strictly greater than the token of
// every earlier acquisition of the same key on this Redis (nested
// acquisitions of a reentrant lock share the outermost one's token); 0 for
// a lock obtained with NoFence. Pass it to the resource so that it can
// refuse writes from a holder whose lease has run out (see
// redislock.Store.WriteFenced).
func (l *Lock) Token() int64 { return l.token }

// OwnerToken returns the random token that identifies this handle's owner
// in Redis: while the handle holds a plain lock, its key (Client.LockKey)
// holds exactly this string, so a script on the same Redis can write only
// while the lock is held, whatever the lease did meanwhile. For a
// reentrant lock it is the Owner's String, a field of the lock's hash.
func (l *Lock) OwnerToken() string { return l.owner }

// Release gives the lock back: it stops the watchdog, if any, and waits for
// it — no renewal is sent after Release returns — then deletes the lock
// only if this handle's owner still holds it, and wakes a waiter; or, when
// an Obtain of the same Client waits for it with Notify, hands it to that
// Obtain instead (see Notify). For a
// reentrant lock it releases one hold; the lock goes when the last hold is
// released. A handle is released once; later calls return ErrNotHeld.
//
// It returns nil, or an error:
//   - the context's error: ctx had ended, nothing was done (Release may be
//     called again);
//   - ErrNotHeld: the lock had expired or is someone else's (it is left
//     alone), or the handle was already released;
//   - one wrapping stockguard.ErrOutcomeUnknown (WithReplicaAck): the lock
//     was deleted on the master, but fewer replicas than required confirmed
//     it; a failover to one that missed it brings the lock back until its
//     lease ends, with this handle released all the same (a fencing store
//     refuses nobody for it: no token was issued since). Nothing to retry;
//   - any other error is Redis failing; the watchdog is stopped all the
//     same, so the lock expires at the end of its lease at the latest.
func (l *Lock) Release(ctx context.Context) error {
	if err := strategy.Canceled(ctx); err != nil {
		return err
	}
	l.mu.Lock()
	if l.released {
		l.mu.Unlock()
		return fmt.Errorf("%w: %q was already released", ErrNotHeld, l.key)
	}
	l.released = true
	wd := l.wd
	l.mu.Unlock()
	if wd != nil {
		wd.stop()
	}
	held, err := l.release(ctx)
	l.end(ErrReleased, nil)
	switch {
	case err != nil:
		return fmt.Errorf("redislock: release %q: %w", l.key, err)
	case !held:
		return fmt.Errorf("%w: %q expired or is held by another owner", ErrNotHeld, l.key)
	}
	return nil
}

func (l *Lock) release(ctx context.Context) (bool, error) {
	if l.reentrant {
		// A decrement resent after a lost reply would count twice.
		n, err := reentrantReleaseScript.Run(ctx, l.c.once, []string{l.keys.lock}, l.owner, l.keys.lock).Int64()
		return n >= 0, err
	}
	// With an ack, no hand-over: its grant would reach the waiter before
	// anyone knows whether the replicas have it.
	if !l.c.acked {
		if w := l.c.notify.claim(l.keys.lock); w != nil {
			return l.handOver(ctx, w)
		}
	}
	return l.c.releaseOwned(ctx, l.keys, l.owner, l.keys.lock)
}

// handOver gives the lock straight to w, a waiter of the same Client
// claimed for it, instead of freeing it: one round trip, where a release
// then w's obtain take two and an announcement. It reports whether the
// handle held the lock, and tells w whether it holds it now; when it
// does not, w tries to obtain it as usual (if the script ran but its reply
// was lost, w's try finds the lock its own).
func (l *Lock) handOver(ctx context.Context, w *waiter) (bool, error) {
	keys := append(make([]string, 0, 2), l.keys.lock)
	fenced := flagOff
	if w.want.fence != "" {
		keys, fenced = append(keys, w.want.fence), flagOn
	}
	sent := time.Now()
	n, err := l.c.batch.run(ctx, lockHandoffScript, keys, l.owner, w.want.owner, w.want.ttl.Milliseconds(), fenced, l.keys.lock).Int64()
	g := grant{sent: sent}
	if err == nil && n != 0 {
		g.ok, g.token = true, max(n, -n)
		if w.want.fence == "" {
			g.token = 0
		}
	}
	w.granted <- g
	return err == nil && n > 0, err
}

// Refresh sets the lock's lease to ttl (at least 1ms) from now, if this
// handle's owner still holds it; it never re-creates a lost lock. With a
// watchdog, later renewals use the new ttl. It returns nil, or an error:
//   - one wrapping stockguard.ErrInvalidRequest: ttl below 1ms;
//   - the context's error: ctx had ended, nothing was sent;
//   - ErrNotHeld: the lock expired, is someone else's, or the handle was
//     released or has seen the lock lost;
//   - one wrapping stockguard.ErrOutcomeUnknown (WithReplicaAck): the lease
//     was extended on the master, not confirmed by the replicas; the
//     handle keeps its old lease (its Context ends by it);
//   - any other error is Redis failing.
func (l *Lock) Refresh(ctx context.Context, ttl time.Duration) error {
	ttl, err := leaseTTL(ttl)
	if err != nil {
		return err
	}
	if err := strategy.Canceled(ctx); err != nil {
		return err
	}
	if err := l.heldErr(); err != nil {
		return err
	}
	sent := time.Now()
	ok, err := l.refresh(ctx, ttl)
	switch {
	case err != nil:
		return fmt.Errorf("redislock: refresh %q: %w", l.key, err)
	case !ok:
		lost := fmt.Errorf("%w: %q expired or is held by another owner", ErrNotHeld, l.key)
		l.end(lost, lost)
		return lost
	}
	l.extend(sent, ttl, true)
	return nil
}

func (l *Lock) refresh(ctx context.Context, ttl time.Duration) (bool, error) {
	script := lockRefreshScript
	if l.reentrant {
		script = reentrantRefreshScript
	}
	// Idempotent: a resend sets the same lease.
	n, err := script.Run(ctx, l.c.writes, []string{l.keys.lock}, l.owner, ttl.Milliseconds()).Int64()
	return n == 1, err
}

// TTL returns the lock's remaining lease as Redis sees it. It returns an
// error wrapping ErrNotHeld when the lock has expired or is someone else's,
// the context's error, or Redis's.
func (l *Lock) TTL(ctx context.Context) (time.Duration, error) {
	if err := strategy.Canceled(ctx); err != nil {
		return 0, err
	}
	script := lockPTTLScript
	if l.reentrant {
		script = reentrantPTTLScript
	}
	n, err := script.Run(ctx, l.c.rdb, []string{l.keys.lock}, l.owner).Int64()
	switch {
	case err != nil:
		return 0, fmt.Errorf("redislock: ttl of %q: %w", l.key, err)
	case n == -3:
		return 0, fmt.Errorf("%w: %q expired or is held by another owner", ErrNotHeld, l.key)
	}
	return time.Duration(n) * time.Millisecond, nil
}

// Context returns a context that is cancelled as soon as this handle no
// longer holds the lock: at Release (context.Cause: ErrReleased), when a
// watchdog renewal or Refresh finds the lock gone, or when the lease runs
// out by this process's clock (cause wrapping ErrNotHeld). The lease is
// measured from before the command that set it, so the context ends no
// later than the lease in Redis, clock-rate drift aside. It carries no
// values; run the guarded work under it to stop that work when the lock is
// lost — though a paused process can still be late (see Lock).
func (l *Lock) Context() context.Context {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.ctx == nil {
		l.ctx, l.cancel = context.WithCancelCause(context.Background())
		if l.ended != nil {
			l.cancel(l.ended)
		}
		l.armLocked()
	}
	return l.ctx
}

// Lost returns a channel that is closed when the lock is lost — a watchdog
// renewal or Refresh found it gone, or its lease ran out by this process's
// clock — but not when it is released.
func (l *Lock) Lost() <-chan struct{} {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.lost == nil {
		l.lost = make(chan struct{})
		if l.lostErr != nil {
			close(l.lost)
		}
		l.armLocked()
	}
	return l.lost
}

// heldErr returns nil while the handle believes it holds the lock, else
// an error wrapping ErrNotHeld.
func (l *Lock) heldErr() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	switch {
	case l.released:
		return fmt.Errorf("%w: %q was released", ErrNotHeld, l.key)
	case l.lostErr != nil:
		return l.lostErr
	}
	return nil
}

// armLocked starts the lease timer once someone watches the handle.
func (l *Lock) armLocked() {
	if l.timer == nil && l.ended == nil {
		l.timer = time.AfterFunc(time.Until(l.validUntil), l.expire)
	}
}

// expire runs when the lease should have run out by this process's clock.
func (l *Lock) expire() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.ended != nil {
		return
	}
	if left := time.Until(l.validUntil); left > 0 {
		l.timer.Reset(left) // extended meanwhile
		return
	}
	lost := fmt.Errorf("%w: the lease of %q ran out", ErrNotHeld, l.key)
	l.endLocked(lost, lost)
}

// extend records a lease of ttl set by a command sent at sent. setTTL
// makes it the ttl of later watchdog renewals.
func (l *Lock) extend(sent time.Time, ttl time.Duration, setTTL bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.ended != nil {
		return
	}
	if setTTL {
		l.ttl = ttl
	}
	l.validUntil = sent.Add(ttl)
	if l.timer != nil {
		l.timer.Reset(time.Until(l.validUntil))
	}
}

// lease returns the ttl for renewals and the current lease end.
func (l *Lock) lease() (time.Duration, time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.ttl, l.validUntil
}

// end records that the handle no longer holds the lock: cause goes to the
// Context, lost (if not nil) also closes Lost. The first end wins.
func (l *Lock) end(cause, lost error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.endLocked(cause, lost)
}

func (l *Lock) endLocked(cause, lost error) {
	if l.ended != nil {
		return
	}
	l.ended = cause
	if l.cancel != nil {
		l.cancel(cause)
	}
	if lost != nil {
		l.lostErr = lost
		if l.lost != nil {
			close(l.lost)
		}
	}
	if l.timer != nil {
		l.timer.Stop()
	}
}

// Valid reports whether the handle still holds the lock by its own
// reckoning: not released, not found lost, and the lease not run out by
// this process's clock (measured from before the command that set it). It
// asks nothing of Redis; a pause right after it returns true can still
// outlast the lease (see Lock).
func (l *Lock) Valid() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.ended == nil && time.Now().Before(l.validUntil)
}
