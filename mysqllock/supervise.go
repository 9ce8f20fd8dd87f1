package mysqllock

import (
	"context"
	"database/sql/driver"
	"fmt"
	"sync"
	"time"

	"github.com/stockguard/stockguard"
)

// Supervised requests.
//
// go-sql-driver/mysql closes a connection whose context ends mid-statement:
// it cannot tell where in the protocol the statement stands, so its watcher
// closes the socket. Under short deadlines that empties the pool, every
// request dials anew, and the dials fail at the caller's deadline (issue:
// 1 ms deadlines cost ~950 dials per 1,000 calls). So a request whose
// context can end runs its statements on a goroutine of its own, under a
// context detached from the caller's, while the caller waits for the
// result or for its own context, whichever comes first. When the caller's
// context ends first it is answered at once, and what the request goes on
// to do depends on what is in flight:
//
//   - a read, getting a connection, or a transaction before its COMMIT
//     (nothing applied, while no write was sent before): the caller gets its
//     context's error; the statement finishes, then the request's context
//     ends, so that no further statement is sent, and the connection goes
//     back to the pool;
//   - a write (exec, COMMIT): the caller gets stockguard.ErrOutcomeUnknown,
//     which it would have got anyway; the write finishes, and the
//     connection goes back to the pool;
//   - anything else (between statements, a statement not sent through
//     exec/get/sel/inTx, a read after a write): the request's context ends
//     at once — as the caller's would have without supervision — and the
//     caller waits for the request's own classification of that, a matter
//     of microseconds: the driver refuses to send a statement under an
//     ended context, and one in flight fails as soon as its socket closes.
//
// A statement still running detachedGrace after the caller left is ended
// the driver's way, which bounds what an abandoned request holds.
//
// The statements of a supervised request run under its context, which
// never carries the caller's deadline. Code inside a request must not
// derive contexts that escape its cancellation (context.WithoutCancel).

// detachedGrace is how long a statement may run on after its caller was
// answered. A statement of a healthy server takes milliseconds; one still
// running after a second waits for a lock or a stalled server, and gives up
// its connection as the driver does.
const detachedGrace = time.Second

// phase is what a supervised request has in flight.
type phase int

const (
	phaseIdle  phase = iota // nothing supervised: between statements, or in one the supervisor does not know
	phaseRead               // a read, or getting a connection: nothing applied
	phaseTx                 // BEGIN up to COMMIT: nothing applied until COMMIT
	phaseWrite              // a write that may apply
)

type requestKey struct{}

// supervision is the supervisor's record of one request.
type supervision struct {
	caller context.Context
	cancel context.CancelFunc // ends the request's context

	mu       sync.Mutex
	phase    phase
	wrote    bool // a write was sent
	left     bool // the caller was answered, or is being answered
	answered bool // the caller was answered without the request's result
}

// supervise runs run under a context detached from caller's and returns
// its result, or answers caller when its context ends first (see above).
func supervise(caller context.Context, run func(context.Context) error) error {
	base, cancel := context.WithCancel(context.WithoutCancel(caller))
	r := &supervision{caller: caller, cancel: cancel}
	ctx := context.WithValue(base, requestKey{}, r)
	type result struct {
		err   error
		panic any
	}
	done := make(chan result, 1)
	go func() {
		defer cancel()
		var res result
		defer func() {
			if res.panic = recover(); res.panic == nil {
				return
			}
			r.mu.Lock()
			answered := r.answered
			r.mu.Unlock()
			if answered { // nobody waits for the result
				panic(res.panic)
			}
			done <- res // the caller panics with it
		}()
		res.err = run(ctx)
		done <- res
	}()
	var res result
	select {
	case res = <-done:
	case <-caller.Done():
		if err, answered := r.abandon(); answered {
			return err
		}
		res = <-done
	}
	if res.panic != nil {
		panic(res.panic)
	}
	return res.err
}

// abandon records that the caller left and returns its answer, unless the
// caller must wait for the request's own (then abandon ends the request's
// context).
func (r *supervision) abandon() (error, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.left = true
	r.answered = true
	switch {
	case r.phase == phaseWrite:
		time.AfterFunc(detachedGrace, r.cancel)
		return fmt.Errorf("%w: the context ended (%v) while a write was in flight", stockguard.ErrOutcomeUnknown, r.caller.Err()), true
	case r.phase != phaseIdle && !r.wrote:
		time.AfterFunc(detachedGrace, r.cancel)
		return ended(r.caller), true
	}
	r.answered = false
	r.cancel()
	return nil, false
}

// enter records that a statement of phase p is about to be sent on ctx's
// request, and returns the function that records its end. It refuses, with
// an error that classify reports as nothing sent, once the caller has
// left. Outside a supervised request it does nothing.
func enter(ctx context.Context, p phase) (func(), error) {
	r, _ := ctx.Value(requestKey{}).(*supervision)
	if r == nil {
		return func() {}, nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.left {
		return nil, leftError{ended(r.caller)}
	}
	prev := r.phase
	switch {
	case prev == phaseTx:
		// Reads and writes inside a transaction apply nothing before COMMIT.
	case p > prev:
		r.phase = p
	}
	if r.phase == phaseWrite {
		r.wrote = true
	}
	return func() {
		r.mu.Lock()
		defer r.mu.Unlock()
		r.phase = prev
		if prev == phaseIdle && r.left {
			r.cancel()
		}
	}, nil
}

// handOver reports whether ctx's caller is still there to take what the
// request got; once it is, the caller will be the one to use it.
func handOver(ctx context.Context) bool {
	r, _ := ctx.Value(requestKey{}).(*supervision)
	if r == nil {
		return true
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return !r.left
}

// callerOf returns the caller's context of a supervised request's context,
// else ctx.
func callerOf(ctx context.Context) context.Context {
	if r, _ := ctx.Value(requestKey{}).(*supervision); r != nil {
		return r.caller
	}
	return ctx
}

// leftError refuses a statement because the request's caller has left:
// nothing was sent. It is the caller's context error, and for classify
// driver.ErrBadConn, the driver's "nothing reached the server".
type leftError struct{ err error }

func (e leftError) Error() string {
	return "mysqllock: not sent, the caller has left: " + e.err.Error()
}

func (e leftError) Unwrap() []error { return []error{e.err, driver.ErrBadConn} }
