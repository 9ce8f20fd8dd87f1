package lock

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// RetryStrategy decides how long Obtain waits before each retry while the
// lock is held by someone else (ObtainRetry): a stockguard.RetryPolicy, the
// retry type of every WithRetry in stockguard's packages, is one. Implementations are stateless, so
// one strategy value may serve any number of concurrent Obtains.
type RetryStrategy interface {
	// Backoff returns the wait before retry number retry (1 for the first
	// retry), or false to give up.
	Backoff(retry int) (time.Duration, bool)
}

type noRetry struct{}

func (noRetry) Backoff(int) (time.Duration, bool) { return 0, false }

// NoRetry makes Obtain try once. It is the default.
//
// Deprecated: use stockguard.RetryPolicy{MaxAttempts: 1}, or no ObtainRetry.
func NoRetry() RetryStrategy { return noRetry{} }

// badStrategy is what a strategy constructor returns for invalid
// arguments: ObtainRetry reports err, so Obtain fails before any I/O.
type badStrategy struct{ err error }

func (badStrategy) Backoff(int) (time.Duration, bool) { return 0, false }
func (b badStrategy) valid() error                    { return b.err }

type linear time.Duration

func (d linear) Backoff(int) (time.Duration, bool) { return time.Duration(d), true }

// LinearBackoff retries every d until Obtain's context ends. d must be at
// least 1ms: a shorter one would hammer Redis, so Obtain with it fails with
// an error wrapping stockguard.ErrInvalidRequest.
//
// Deprecated: use stockguard.RetryPolicy{MaxAttempts: n, BaseDelay: d,
// MaxDelay: d}, which waits a random time in (0, d] before each of n-1
// retries.
func LinearBackoff(d time.Duration) RetryStrategy {
	if d < time.Millisecond {
		return badStrategy{fmt.Errorf("LinearBackoff(%v) below 1ms", d)}
	}
	return linear(d)
}

type exponential struct{ lo, hi time.Duration }

func (e exponential) Backoff(retry int) (time.Duration, bool) {
	ceiling := e.hi
	if shift := retry - 1; shift < 63 && e.lo <= e.hi>>shift {
		ceiling = e.lo << shift // no overflow: at most hi
	}
	return rand.N(ceiling) + 1, true
}

// ExponentialBackoff retries until Obtain's context ends, waiting a random
// time in (0, ceiling] — full jitter, which keeps colliding waiters from
// retrying in lock-step — where the ceiling starts at lo and doubles with
// each retry up to hi. lo must be at least 1ms and hi at least lo, else
// Obtain with it fails with an error wrapping stockguard.ErrInvalidRequest.
//
// Deprecated: use stockguard.RetryPolicy{MaxAttempts: n, BaseDelay: lo,
// MaxDelay: hi}.
func ExponentialBackoff(lo, hi time.Duration) RetryStrategy {
	if lo < time.Millisecond || hi < lo {
		return badStrategy{fmt.Errorf("ExponentialBackoff(%v, %v): want 1ms ≤ lo ≤ hi", lo, hi)}
	}
	return exponential{lo: lo, hi: hi}
}

type limit struct {
	s RetryStrategy
	n int
}

func (l limit) Backoff(retry int) (time.Duration, bool) {
	if retry > l.n {
		return 0, false
	}
	return l.s.Backoff(retry)
}

func (l limit) valid() error {
	if v, ok := l.s.(interface{ valid() error }); ok {
		return v.valid()
	}
	return nil
}

// LimitRetry bounds s to at most n retries (n+1 attempts in all). A nil s
// or a negative n makes Obtain with it fail with an error wrapping
// stockguard.ErrInvalidRequest.
//
// Deprecated: use a stockguard.RetryPolicy with MaxAttempts n+1.
func LimitRetry(s RetryStrategy, n int) RetryStrategy {
	if s == nil || n < 0 {
		return badStrategy{fmt.Errorf("LimitRetry(%v, %d): want a strategy and n ≥ 0", s, n)}
	}
	return limit{s: s, n: n}
}

// linger is how long a notifier keeps its pub/sub connection after the last
// waiter has left, so that bursts of contention do not dial each time.
const linger = 3 * time.Second

// notifier delivers release announcements to the waiting Obtains of one
// Client over one shared pub/sub connection (Redisson does the same; a
// connection per waiter would cost a dial per contended Obtain).
//
// A wake is only a hint to try again — the obtain script decides — so
// every failure mode here (a dropped connection, a lost message, a stale
// confirmation) costs at most a wait until the waiter's fallback timer,
// never a wrong answer.
type notifier struct {
	rdb RedisClient

	mu       sync.Mutex
	ps       *redis.PubSub // nil while nobody waits (after linger)
	topics   map[string]*topic
	inflight map[string]int // SUBSCRIBEs sent per channel whose confirmation has not arrived
	idle     *time.Timer
}

// maxHandoffs is how many times in a row a release hands the lock to a
// waiter of the same Client (Lock.Release): the next release frees the
// lock and announces it, so that waiters in other processes, which hear of
// no hand-over, get their turn.
const maxHandoffs = 16

// topic is the waiters of one lock's release channel.
type topic struct {
	waiters  []*waiter // in arrival order: the earliest gets the next wake, or the lock
	live     bool      // the subscription is confirmed: announcements arrive
	handoffs int       // hand-overs since the lock was last freed
}

// waiter is one waiting Obtain.
type waiter struct {
	n       *notifier
	channel string
	wake    chan struct{} // capacity 1: one pending wake at most
	// want is what the waiter would take the lock as; nil when a release
	// cannot hand the lock to it (a reentrant lock, IfExists).
	want *handoff
	// claimed: a release is handing the lock to the waiter, and will send
	// the outcome on granted. Guarded by n.mu.
	claimed bool
	granted chan grant // capacity 1
}

// handoff is what a waiter would take a lock as.
type handoff struct {
	owner string
	ttl   time.Duration
	fence string // the fencing counter; "" for NoFence
}

// grant is the outcome of a hand-over: whether the waiter holds the lock
// now, with which fencing token, as of a command sent at sent.
type grant struct {
	ok    bool
	token int64
	sent  time.Time
}

func (w *waiter) signal() bool {
	select {
	case w.wake <- struct{}{}:
		return true
	default:
		return false
	}
}

// wakeOne wakes the earliest waiter that has no wake pending. One release
// frees the lock for one holder, so waking them all would only make the
// rest fail their attempt and wait again.
func (t *topic) wakeOne() {
	for _, w := range t.waiters {
		if !w.claimed && w.signal() {
			return
		}
	}
}

// claim picks the waiter on channel that a release should hand the lock
// to: the earliest that can take it, unless the lock has been handed over
// maxHandoffs times in a row. The release must then send the outcome on the
// waiter's granted, and only then may the waiter leave. Nil when the lock
// is to be freed instead.
func (n *notifier) claim(channel string) *waiter {
	n.mu.Lock()
	defer n.mu.Unlock()
	t := n.topics[channel]
	if t == nil {
		return nil
	}
	if t.handoffs < maxHandoffs {
		for _, w := range t.waiters {
			if w.want != nil && !w.claimed {
				w.claimed = true
				t.handoffs++
				return w
			}
		}
	}
	t.handoffs = 0
	return nil
}

// queued reports whether waiters on channel could take a handed-over lock:
// then a new Obtain with Notify queues up behind them without trying, as
// its try would fail — they are waiting for a lock that is held.
func (n *notifier) queued(channel string) bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	t := n.topics[channel]
	return t != nil && slices.ContainsFunc(t.waiters, func(w *waiter) bool { return w.want != nil })
}

// settle returns the outcome of the hand-over that claimed w, waiting for
// it, or false when w was not claimed. A waiter that leaves settles first.
func (w *waiter) settle() (grant, bool) {
	w.n.mu.Lock()
	claimed := w.claimed
	w.n.mu.Unlock()
	if !claimed {
		return grant{}, false
	}
	return <-w.granted, true
}

// unclaim records that w has received the outcome of its hand-over: it
// can be claimed again (after a failed one), and leaves without settling.
func (w *waiter) unclaim() {
	w.n.mu.Lock()
	w.claimed = false
	w.n.mu.Unlock()
}

// join registers a waiter on channel, which a release may hand the lock
// to as want (nil: never). Unless it queued without trying (tried false),
// its wake channel fires once the subscription is confirmed (or at once
// when it already is): a release between the caller's failed attempt and
// the subscription is not announced to it, so it must try again then; and
// after that, once per announced release meant for it.
func (n *notifier) join(ctx context.Context, channel string, want *handoff, tried bool) *waiter {
	w := &waiter{n: n, channel: channel, wake: make(chan struct{}, 1), want: want, granted: make(chan grant, 1)}
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.idle != nil {
		n.idle.Stop()
		n.idle = nil
	}
	if n.ps == nil {
		n.ps = n.rdb.Subscribe(context.WithoutCancel(ctx))
		n.topics = make(map[string]*topic)
		n.inflight = make(map[string]int)
		go n.receive(n.ps)
	}
	t := n.topics[channel]
	if t == nil {
		t = &topic{}
		n.topics[channel] = t
		// On failure go-redis still resubscribes when it reconnects, and
		// that confirmation makes the topic live.
		if err := n.ps.Subscribe(ctx, channel); err == nil {
			n.inflight[channel]++
		}
	}
	t.waiters = append(t.waiters, w)
	if t.live && tried {
		w.signal()
	}
	return w
}

// leave unregisters w. When w leaves without the lock (passOn), a wake it
// did not use goes to the next waiter.
func (w *waiter) leave(passOn bool) {
	n := w.n
	n.mu.Lock()
	defer n.mu.Unlock()
	t := n.topics[w.channel]
	for i, o := range t.waiters {
		if o == w {
			t.waiters = append(t.waiters[:i], t.waiters[i+1:]...)
			break
		}
	}
	if passOn && len(w.wake) > 0 {
		t.wakeOne()
	}
	if len(t.waiters) > 0 {
		return
	}
	delete(n.topics, w.channel)
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	_ = n.ps.Unsubscribe(ctx, w.channel) // failing, the connection is gone and so is the subscription
	cancel()
	if len(n.topics) == 0 {
		ps := n.ps
		n.idle = time.AfterFunc(linger, func() { n.closeIdle(ps) })
	}
}

// closeIdle closes ps if nobody has waited since it was scheduled.
func (n *notifier) closeIdle(ps *redis.PubSub) {
	n.mu.Lock()
	if n.ps != ps || len(n.topics) > 0 {
		n.mu.Unlock()
		return
	}
	n.ps, n.idle = nil, nil
	n.mu.Unlock()
	_ = ps.Close()
}

// receive dispatches what ps receives until ps is closed.
func (n *notifier) receive(ps *redis.PubSub) {
	var pause time.Duration
	for {
		msg, err := ps.Receive(context.Background())
		if err != nil {
			if !n.reset(ps) {
				return
			}
			// go-redis reconnects and resubscribes on the next Receive.
			pause = min(max(2*pause, 10*time.Millisecond), time.Second)
			time.Sleep(pause)
			continue
		}
		pause = 0
		switch m := msg.(type) {
		case *redis.Subscription:
			if m.Kind == "subscribe" {
				n.subscribed(ps, m.Channel)
			}
		case *redis.Message:
			n.announced(ps, m.Channel)
		}
	}
}

// reset forgets what the broken connection of ps had confirmed: the
// resubscriptions of the next connection will confirm it again, and wake
// every waiter, since announcements may have been missed meanwhile. It
// reports whether ps is still the notifier's.
func (n *notifier) reset(ps *redis.PubSub) bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.ps != ps {
		return false
	}
	clear(n.inflight)
	for _, t := range n.topics {
		t.live = false
	}
	return true
}

// subscribed handles a subscription confirmation. Confirmations arrive in
// the order the SUBSCRIBEs were sent, so while more of them are in flight
// for the channel, this one belongs to an older subscription (since
// unsubscribed) and proves nothing about the current one.
func (n *notifier) subscribed(ps *redis.PubSub, channel string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.ps != ps {
		return
	}
	if c := n.inflight[channel]; c > 1 {
		n.inflight[channel] = c - 1
		return
	}
	delete(n.inflight, channel)
	if t := n.topics[channel]; t != nil && !t.live {
		t.live = true
		for _, w := range t.waiters {
			if !w.claimed {
				w.signal()
			}
		}
	}
}

// announced handles a release announcement.
func (n *notifier) announced(ps *redis.PubSub, channel string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.ps != ps {
		return
	}
	if t := n.topics[channel]; t != nil {
		t.wakeOne()
	}
}
