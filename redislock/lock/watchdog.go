package lock

import (
	"context"
	"fmt"
	"time"
)

// watchdog is the renewer goroutine of one Lock.
type watchdog struct {
	ctx    context.Context // cancelled by stop; bounds in-flight renewals
	cancel context.CancelFunc
	done   chan struct{} // closed when the goroutine has returned
}

// startWatchdog starts renewing l, obtained by a command sent at since.
// maxHold > 0 caps the total hold time.
func (l *Lock) startWatchdog(since time.Time, maxHold time.Duration) *watchdog {
	ctx, cancel := context.WithCancel(context.Background())
	wd := &watchdog{ctx: ctx, cancel: cancel, done: make(chan struct{})}
	go l.watch(wd, since, maxHold)
	return wd
}

// stop ends the renewals and waits until the goroutine has returned, so
// that no renewal is in flight or sent afterwards.
func (wd *watchdog) stop() {
	wd.cancel()
	<-wd.done
}

// watch renews the lease every ttl/3, which leaves two more tries before
// it runs out when a renewal fails. It returns when stopped, when the lock
// is found gone (ending the handle as lost), when the lease ran out while
// renewals failed (likewise), or when maxHold is used up (then the last
// lease simply runs out).
func (l *Lock) watch(wd *watchdog, since time.Time, maxHold time.Duration) {
	defer close(wd.done)
	ttl, _ := l.lease()
	timer := time.NewTimer(ttl / 3)
	defer timer.Stop()
	for {
		select {
		case <-wd.ctx.Done():
			return
		case <-timer.C:
		}
		if l.heldErr() != nil {
			return // lost: renewing would keep a lock nobody uses
		}
		ttl, validUntil := l.lease()
		next := ttl / 3
		if maxHold > 0 {
			left := (maxHold - time.Since(since)).Truncate(time.Millisecond)
			if left < time.Millisecond {
				return
			}
			ttl = min(ttl, left)
		}
		sent := time.Now()
		// A renewal answered after the lease ran out proves nothing.
		ctx, cancel := context.WithDeadline(wd.ctx, validUntil)
		ok, err := l.refresh(ctx, ttl)
		cancel()
		switch {
		case wd.ctx.Err() != nil:
			return // stopped by Release; whatever the renewal did, Release deletes the lock next
		case err == nil && ok:
			l.extend(sent, ttl, false)
		case err == nil:
			lost := fmt.Errorf("%w: the watchdog found %q gone or taken over", ErrNotHeld, l.key)
			l.end(lost, lost)
			return
		case !time.Now().Before(validUntil):
			lost := fmt.Errorf("%w: the lease of %q ran out while renewals failed: %w", ErrNotHeld, l.key, err)
			l.end(lost, lost)
			return
		default:
			next = ttl / 9 // Redis failed; try again sooner, the lease is running out
		}
		timer.Reset(max(next, time.Millisecond))
	}
}
