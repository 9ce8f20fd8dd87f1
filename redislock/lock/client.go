package lock

import (
	"context"
	"crypto/rand"
	_ "embed"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stockguard/stockguard"
	"github.com/stockguard/stockguard/internal/rediskeys"
	"github.com/stockguard/stockguard/internal/redisx"
	"github.com/stockguard/stockguard/strategy"
)

// Errors of the lock client. Compare with errors.Is.
var (
	// ErrNotObtained: the lock is held by someone else and Obtain's retry
	// strategy gave up (or its context ended, then joined with ctx's error).
	ErrNotObtained = errors.New("redislock: lock not obtained")
	// ErrNotHeld: the lock is no longer held by this handle's owner — its
	// lease ran out, someone else holds it now, or the handle was released.
	ErrNotHeld = errors.New("redislock: lock not held")
	// ErrReleased is the cause (context.Cause) of a Lock's Context after
	// Release.
	ErrReleased = errors.New("redislock: lock released")
	// ErrNotExist: Obtain with IfExists found that key missing; no lock was
	// taken and nothing was created.
	ErrNotExist = errors.New("redislock: the key the lock requires does not exist")
)

// RedisClient is the part of a go-redis client that this package's locks
// need: Lua scripting for every lock operation, Process to send commands
// that must not be resent, and pub/sub for notified waiting (Notify). Every
// redis.UniversalClient — *redis.Client, *redis.ClusterClient, *redis.Ring,
// a failover client — satisfies it.
type RedisClient interface {
	redis.Scripter
	Process(ctx context.Context, cmd redis.Cmder) error
	Subscribe(ctx context.Context, channels ...string) *redis.PubSub
}

var (
	//go:embed lock_obtain.lua
	lockObtainLua string
	//go:embed lock_release.lua
	lockReleaseLua string
	//go:embed lock_refresh.lua
	lockRefreshLua string
	//go:embed lock_pttl.lua
	lockPTTLLua string
	//go:embed lock_handoff.lua
	lockHandoffLua string

	lockObtainScript  = redis.NewScript(lockObtainLua)
	lockReleaseScript = redis.NewScript(lockReleaseLua)
	lockRefreshScript = redis.NewScript(lockRefreshLua)
	lockPTTLScript    = redis.NewScript(lockPTTLLua)
	lockHandoffScript = redis.NewScript(lockHandoffLua)
)

// Client obtains locks on one Redis deployment (a single master, or a
// cluster: a lock's keys share a hash tag). The lock on key lives in
// "<prefix>lock:{key}" (LockKey), its fencing counter in
// "<prefix>fence:{key}" (FenceKey) — the same names redislock.NewGuarded
// uses for a SKU, so a lock on a SKU obtained here with the same prefix
// excludes that inventory's decrements of the SKU.
//
// Fencing is a choice made per Obtain, and it has a price in memory: the
// fencing counter has no expiry and must never be deleted, because tokens
// are strictly increasing only as long as it lives — so a fenced lock
// leaves one small key per distinct lock name behind, for good. Locks on
// an open-ended set of names (request IDs, user input) that pass no token
// to a resource should be obtained with NoFence, which creates nothing that
// outlives the lock; IfExists takes a lock only for a resource that exists,
// so that a name nobody stocked gets no counter either. (A counter lost with
// an unpersisted Redis restarts at 1, and a fenced store refuses every
// write until the new tokens pass the highest it has seen: safe, but stuck
// — persist Redis, or raise the counter.)
//
// A Client is safe for concurrent use. It holds no connection of its own
// until an Obtain waits with Notify; the pub/sub connection that waiting
// opens is shared by all its waiters and closed a few seconds after the
// last one is done. Lock scripts that its goroutines run at the same time
// are sent together, as one go-redis pipeline (a client without
// Pipeline, which every redis.UniversalClient has, sends them one by one).
type Client struct {
	rdb    RedisClient
	writes redis.Scripter // rdb, each script followed by the ack's WAIT (WithReplicaAck)
	once   redis.Scripter // writes with EVAL/EVALSHA sent at most once
	batch  *scriptPipe    // writes' idempotent scripts, pipelined across goroutines
	acked  bool           // WithReplicaAck or WithAOFAck: no hand-over, see Obtain
	keys   rediskeys.Keys
	notify *notifier
}

// New returns a lock client over rdb. It reads the options WithPrefix,
// WithReplicaAck and WithAOFAck.
//
// With WithReplicaAck (or WithAOFAck), every script that writes — obtain
// with its fencing counter, refresh, release — is followed by the ack's
// WAIT on its connection, the scripts of concurrent goroutines are no
// longer pipelined together, and a Release hands the lock to no waiter
// (it frees it and announces it; the waiter obtains it with its own,
// acknowledged, script). A fencing token is handed out only once n
// replicas have the counter's increment, so the tokens a failover to one
// of them leaves behind never repeat one handed out.
func New(rdb RedisClient, opts ...Option) (*Client, error) {
	o := newOptions(opts)
	o.only("New", readsClient)
	if o.err != nil {
		return nil, o.err
	}
	return newClient(rdb, o), nil
}

// newClient builds what New returns, from valid options.
func newClient(rdb RedisClient, o options) *Client {
	writes := redisx.Acked(rdb, o.ack)
	return &Client{rdb: rdb, writes: writes, once: redisx.OnceScripter(writes), batch: newScriptPipe(writes),
		acked: o.ack.On(), keys: o.keys, notify: &notifier{rdb: rdb}}
}

// ObtainOption configures one Obtain.
type ObtainOption func(*obtainOptions)

type obtainOptions struct {
	retry     RetryStrategy
	notify    bool
	watchdog  bool
	maxHold   time.Duration
	owner     Owner
	reentrant bool
	unfenced  bool
	exists    string // IfExists: the key that must exist; "" for none
	err       error  // the first invalid option
}

// fail records the first invalid ObtainOption.
func (o *obtainOptions) fail(err error) {
	if o.err == nil {
		o.err = fmt.Errorf("%w: redislock: %w", stockguard.ErrInvalidRequest, err)
	}
}

// obtainSetup applies opts and checks them and ttl, which Redis keeps in
// whole milliseconds; an invalid option or a ttl below 1ms is an error
// wrapping stockguard.ErrInvalidRequest.
func obtainSetup(ttl time.Duration, opts []ObtainOption) (obtainOptions, time.Duration, error) {
	var o obtainOptions
	for _, opt := range opts {
		opt(&o)
	}
	if o.err != nil {
		return o, 0, o.err
	}
	ttl, err := leaseTTL(ttl)
	return o, ttl, err
}

// leaseTTL drops ttl's sub-millisecond part; what is left must be at least
// 1ms, else the error wraps stockguard.ErrInvalidRequest.
func leaseTTL(ttl time.Duration) (time.Duration, error) {
	ttl = ttl.Truncate(time.Millisecond)
	if ttl < time.Millisecond {
		return 0, fmt.Errorf("%w: redislock: lock ttl %v below 1ms", stockguard.ErrInvalidRequest, ttl)
	}
	return ttl, nil
}

// ObtainRetry sets how Obtain retries while the lock is held by someone
// else (not to be confused with redislock.WithRetry, the retry policy of
// an inventory's requests), as a stockguard.RetryPolicy says, e.g.
// ObtainRetry(stockguard.RetryPolicy{MaxAttempts: 50, BaseDelay:
// time.Millisecond, MaxDelay: 50 * time.Millisecond}). A policy
// RetryPolicy.Validate refuses, an Adaptive one (Obtain keeps no count of
// waiters to adapt to) and a nil strategy are invalid options. Default one
// attempt, or with Notify retries every second until ctx ends. Whatever
// the policy, Obtain stops when its context ends.
func ObtainRetry(s RetryStrategy) ObtainOption {
	return func(o *obtainOptions) {
		if s == nil {
			o.fail(errors.New("nil RetryStrategy"))
			return
		}
		if p, ok := s.(stockguard.RetryPolicy); ok {
			if err := p.Validate(); err != nil {
				o.fail(err)
				return
			}
			if p.Adaptive {
				o.fail(errors.New("an Adaptive RetryPolicy: Obtain keeps no count of waiters to adapt to"))
				return
			}
		}
		if v, ok := s.(interface{ valid() error }); ok {
			if err := v.valid(); err != nil {
				o.fail(err)
				return
			}
		}
		o.retry = s
	}
}

// Notify makes a retrying Obtain wait for the lock's release instead of
// polling: before its first retry it subscribes to the lock's release
// channel (published by every release), then sleeps until a release is
// announced, the holder's lease runs out, or the retry strategy's backoff
// elapses — the backoff is only the fallback for a lost message, so make
// it long. Waiters of one Client share one pub/sub connection, and each
// announced release wakes one of them, not all.
//
// Within one Client, waiting is a queue: a Release through the same Client
// hands the lock straight to the earliest waiter (a plain lock without
// IfExists), which gets it with its own lease and a fresh fencing token,
// without the lock ever being free; an Obtain that finds others of the
// Client waiting queues up behind them without trying first. After 16
// hand-overs in a row a release frees the lock and announces it, so that
// waiters of other Clients get their turn. Default off.
func Notify() ObtainOption {
	return func(o *obtainOptions) { o.notify = true }
}

// Watchdog keeps the lock alive while it is held: a goroutine renews the
// lease every ttl/3 (owner-checked, never re-creating a lost lock) until
// Release, and cancels the Lock's Context as soon as a renewal finds the
// lock gone, or the lease ran out while renewals failed. Default off. See
// Lock for what a watchdog cannot protect against.
func Watchdog() ObtainOption {
	return func(o *obtainOptions) { o.watchdog = true }
}

// MaxHold caps the total time a watchdog keeps the lock: it shortens the
// last renewals so the lease ends d after Obtain, then stops. It implies
// Watchdog. d below 1ms is an invalid option. Default: no cap.
func MaxHold(d time.Duration) ObtainOption {
	return func(o *obtainOptions) {
		if d < time.Millisecond {
			o.fail(fmt.Errorf("MaxHold %v below 1ms", d))
			return
		}
		o.watchdog, o.maxHold = true, d
	}
}

// NoFence makes Obtain issue no fencing token (Lock.Token is 0) and touch
// no fencing counter, so nothing of the lock outlives it: for locks that
// pass no token to a resource, on names that come and go. A resource can
// still refuse a late holder by its owner token (Lock.OwnerToken), as long
// as it lives in the lock's Redis. Not with Reentrant. Default: fenced.
func NoFence() ObtainOption {
	return func(o *obtainOptions) { o.unfenced = true }
}

// IfExists makes Obtain take the lock only if key exists, checked in the
// same script that takes the lock: otherwise Obtain fails with ErrNotExist,
// having taken nothing and created nothing — no lock, no fencing counter.
// It is for locks on resources kept in Redis, so that a request for one
// that does not exist leaves no trace; in a cluster, key must share the
// lock's hash tag ("stock:{sku}" for a lock on "sku"). Not with Reentrant.
func IfExists(key string) ObtainOption {
	return func(o *obtainOptions) {
		if key == "" {
			o.fail(errors.New("IfExists of an empty key"))
			return
		}
		o.exists = key
	}
}

// LockKey returns the Redis key of the lock on key: "<prefix>lock:{key}".
// While a handle holds a plain lock, that key holds its OwnerToken, which
// a script on the same master (and, in a cluster, hash tag) can check to
// write only while the lock is held.
func (c *Client) LockKey(key string) string { return c.keys.Lock(key) }

// FenceKey returns the Redis key of the fencing counter of the lock on key:
// "<prefix>fence:{key}". It holds the newest token issued, and exists only
// once a fenced Obtain has taken the lock.
func (c *Client) FenceKey(key string) string { return c.keys.Fence(key) }

// lockKeys are the names one lock works with. Its releases are announced
// on a pub/sub channel named like its lock key (channels and keys do not
// share a namespace).
type lockKeys struct {
	lock   string
	fence  string // "" for a lock that issues no fencing tokens
	exists string // "" unless the lock requires a key to exist
}

// keysFor returns the names of the lock on key, fenced or not (NoFence;
// Redlock's and segment locks are not: nothing outlives them).
func (c *Client) keysFor(key string, fenced bool) lockKeys {
	k := lockKeys{lock: c.keys.Lock(key)}
	if fenced {
		k.fence = c.keys.Fence(key)
	}
	return k
}

// noAnnounce is the release channel of a lock nobody waits for with
// Notify (Redlock's): the release script then publishes nothing.
const noAnnounce = ""

// releaseOwned deletes the plain (not reentrant) lock k if owner holds it,
// announcing the release on channel unless it is noAnnounce, and reports
// whether it did.
func (c *Client) releaseOwned(ctx context.Context, k lockKeys, owner, channel string) (bool, error) {
	n, err := c.batch.run(ctx, lockReleaseScript, []string{k.lock}, owner, channel).Int64()
	return n == 1, err
}

// Obtain takes the lock on key for ttl (at least 1ms; sub-millisecond
// parts are dropped, as Redis keeps leases in milliseconds) and returns
// its handle, with a fresh fencing token (Lock.Token) unless it re-enters
// a reentrant lock or NoFence says otherwise. It returns the handle or an
// error:
//   - one wrapping stockguard.ErrInvalidRequest: ttl below 1ms, an invalid
//     option, Reentrant with a zero Owner, or with NoFence or IfExists;
//     nothing sent;
//   - the context's error: ctx ended before the first attempt;
//   - ErrNotExist: the key given to IfExists does not exist; nothing taken
//     or created;
//   - ErrNotObtained: the lock is held and the retry strategy gave up; if
//     ctx ended while waiting (or during a retry), ErrNotObtained joined
//     with ctx's error;
//   - one wrapping stockguard.ErrOutcomeUnknown (WithReplicaAck,
//     WithAOFAck): the script ran on the master but fewer replicas than
//     required confirmed it within the timeout. No handle and no token are
//     handed out (the token is skipped, never reused); the lock was
//     released again, owner-checked, so nothing is left held on the
//     master, and a failover to a replica that had it brings back a lock
//     nobody holds that expires after ttl — never a wedged lock. Retrying
//     is safe. With WithAOFAck on a server without WAITAOF, every Obtain
//     fails with stockguard.ErrUnavailable, nothing sent;
//   - any other error is Redis failing (wrapped go-redis error). If it
//     failed after the script was sent, the lock may have been taken: it
//     then expires after ttl.
func (c *Client) Obtain(ctx context.Context, key string, ttl time.Duration, opts ...ObtainOption) (*Lock, error) {
	o, ttl, err := obtainSetup(ttl, opts)
	switch {
	case err != nil:
		return nil, err
	case o.reentrant && o.owner.id == "":
		return nil, fmt.Errorf("%w: redislock: reentrant lock with a zero Owner (use NewOwner)", stockguard.ErrInvalidRequest)
	case o.reentrant && (o.unfenced || o.exists != ""):
		return nil, fmt.Errorf("%w: redislock: a reentrant lock takes no NoFence or IfExists", stockguard.ErrInvalidRequest)
	}
	if err := strategy.Canceled(ctx); err != nil {
		return nil, err
	}
	retry := o.retry
	if retry == nil {
		retry = noRetry{}
		if o.notify {
			retry = linear(time.Second)
		}
	}
	owner := o.owner.id
	if !o.reentrant {
		owner = newToken()
	}
	k := c.keysFor(key, !o.unfenced)
	k.exists = o.exists

	var want *handoff // what a release may hand the lock to this Obtain as
	if o.notify && !o.reentrant && k.exists == "" {
		want = &handoff{owner: owner, ttl: ttl, fence: k.fence}
	}
	var (
		w     *waiter
		timer *time.Timer
		l     *Lock
	)
	defer func() {
		if w != nil {
			if g, claimed := w.settle(); l == nil && claimed && g.ok {
				// Handed the lock as this Obtain gave up: give it back.
				c.abandon(k, owner)
			}
			w.leave(l == nil)
		}
		if timer != nil {
			timer.Stop()
		}
	}()
	// When others of this Client wait for the lock already, a try would
	// fail: queue up behind them without one. A release hands the lock to
	// the earliest.
	_, patient := retry.Backoff(1)
	queue := want != nil && patient && c.notify.queued(k.lock)
	for attempt := 1; ; attempt++ {
		var holder time.Duration
		if !queue || attempt > 1 {
			sent := time.Now()
			obtained, token, left, err := c.attempt(ctx, k, owner, ttl, o.reentrant)
			if errors.Is(err, errMissing) {
				return nil, fmt.Errorf("%w: %q, so no lock on %q", ErrNotExist, k.exists, key)
			}
			if err != nil {
				if attempt > 1 && ctx.Err() != nil && !o.reentrant {
					// ctx ended in a retry, which is waiting all the same. The
					// script may have taken the lock before its reply was lost:
					// delete it (owner-checked, so only ours) to make "not
					// obtained" true instead of leaving it until ttl.
					c.abandon(k, owner)
					return nil, errors.Join(
						fmt.Errorf("%w: %q is held by another owner (%d attempts)", ErrNotObtained, key, attempt),
						strategy.Canceled(ctx))
				}
				return nil, fmt.Errorf("redislock: obtain %q: %w", key, err)
			}
			if obtained {
				l = c.newLock(key, k, owner, token, ttl, sent, &o)
				return l, nil
			}
			holder = left
		}
		d, ok := retry.Backoff(attempt)
		if !ok {
			return nil, fmt.Errorf("%w: %q is held by another owner (%d attempts)", ErrNotObtained, key, attempt)
		}
		var (
			wake    <-chan struct{}
			granted <-chan grant
		)
		if o.notify {
			if w == nil {
				w = c.notify.join(ctx, k.lock, want, !queue)
			}
			wake, granted = w.wake, w.granted
			if holder > 0 {
				// The lock is free by then at the latest, released or not.
				d = min(d, holder+time.Millisecond)
			}
		}
		if timer == nil {
			timer = time.NewTimer(d)
		} else {
			timer.Reset(d)
		}
		select {
		case <-ctx.Done():
			return nil, errors.Join(
				fmt.Errorf("%w: %q is held by another owner (%d attempts)", ErrNotObtained, key, attempt),
				strategy.Canceled(ctx))
		case <-timer.C:
		case <-wake:
		case g := <-granted:
			w.unclaim() // settled; after a failed hand-over, back in line
			if g.ok {
				l = c.newLock(key, k, owner, g.token, ttl, g.sent, &o)
				return l, nil
			}
		}
	}
}

// abandon deletes owner's lock on k, if the lock is owner's, on a context of
// its own: the caller's has ended.
func (c *Client) abandon(k lockKeys, owner string) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	_, _ = c.releaseOwned(ctx, k, owner, k.lock)
}

// The obtain script's flags, boxed once rather than per call.
var flagOn, flagOff any = "1", "0"

// errMissing: the obtain script found the key of IfExists missing.
var errMissing = errors.New("redislock: missing")

// attempt runs the obtain script once. It reports whether the lock was
// obtained and its fencing token (0 for a lock without a fencing counter,
// k.fence empty), else the holder's remaining lease (0 when unknown). The
// error is errMissing when k.exists does not exist, else Redis's.
func (c *Client) attempt(ctx context.Context, k lockKeys, owner string, ttl time.Duration, reentrant bool) (bool, int64, time.Duration, error) {
	var cmd *redis.Cmd
	if reentrant {
		// Re-entering counts: a resent script would count twice.
		cmd = reentrantObtainScript.Run(ctx, c.once, []string{k.lock, k.fence}, owner, ttl.Milliseconds())
	} else {
		keys := append(make([]string, 0, 3), k.lock)
		fenced, exists := flagOff, flagOff
		if k.fence != "" {
			keys, fenced = append(keys, k.fence), flagOn
		}
		if k.exists != "" {
			keys, exists = append(keys, k.exists), flagOn
		}
		// Idempotent for its owner token, so go-redis may resend it.
		cmd = c.batch.run(ctx, lockObtainScript, keys, owner, ttl.Milliseconds(), fenced, exists)
	}
	n, err := cmd.Int64()
	if redisx.NotAcked(err) {
		// Taken (or found held) on the master, not confirmed by the
		// replicas: hand out no handle, and undo it, so that no lock is
		// left that nobody holds a handle to — not after a failover to a
		// replica that has it either, where it expires after ttl.
		c.unack(k, owner, reentrant, cmd)
		return false, 0, 0, err
	}
	switch {
	case errors.Is(err, redis.Nil):
		return false, 0, 0, errMissing
	case err != nil:
		return false, 0, 0, err
	case n > 0:
		if k.fence == "" {
			n = 0
		}
		return true, n, 0, nil
	}
	return false, 0, time.Duration(-n) * time.Millisecond, nil
}

// unack undoes an obtain whose ack fell short, on a context of its own: a
// plain lock is released if owner holds it; a reentrant one, if cmd's
// reply says it counted this entry, is released once.
func (c *Client) unack(k lockKeys, owner string, reentrant bool, cmd *redis.Cmd) {
	if !reentrant {
		c.abandon(k, owner)
		return
	}
	if n, ok := cmd.Val().(int64); ok && n > 0 {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_ = reentrantReleaseScript.Run(ctx, c.once, []string{k.lock}, owner, k.lock).Err()
	}
}

// newToken returns 128 random bits, hex-encoded: an owner token nobody
// else will ever present.
func newToken() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // never fails (crypto/rand, Go ≥ 1.24)
	return hex.EncodeToString(b[:])
}
