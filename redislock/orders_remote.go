package redislock

import (
	"cmp"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/stockguard/stockguard"
	"github.com/stockguard/stockguard/internal/errtext"
	"github.com/stockguard/stockguard/internal/redisx"
)

// errRestart: this attempt at an order was undone under its client (its
// pending deadline passed, or a newer attempt owns a line); begin again.
var errRestart = errors.New("redislock: the order's attempt was undone")

// placeRemote runs a Take, Hold or Restock whose keys span slots: the
// two-phase protocol of orders_record.lua and orders_line.lua.
func (a *Atomic) placeRemote(ctx context.Context, kind byte, id string, ttl time.Duration, lines []stockguard.Line) error {
	args := make([]any, 0, 6+2*len(lines))
	args = append(args, string(kind), rand.Text()[:10], ttlMicros(ttl), a.window().Microseconds(), 0, 0)
	for _, l := range lines {
		args = append(args, l.SKU, l.Qty)
	}
	for tries, fences := 0, 0; tries < 4; tries++ {
		args[4], args[5] = a.bounds.stamp(ctx)
		r, err := a.recordOp(ctx, id, "begin", args...)
		switch {
		case err != nil:
			return err
		case r.flag == "mismatch":
			return errtext.Mismatch(id, "")
		case r.flag == "stale":
			return errStale
		case r.flag == "fenced" && fences == 3:
			return errKeptFenced
		case r.flag == "fenced":
			// Not a try: the ID was refused (or an attempt undone) just
			// before this call's begin was sent.
			if err := a.bounds.wait(ctx, &fencedError{after: time.UnixMicro(r.refused).Add(a.bounds.skew)}); err != nil {
				return err
			}
			fences++
			tries--
			continue
		}
		ours, compared := r.flag == "new", r.state != 'p' && r.state != 'u'
		mine := ""
		if ours {
			mine = r.nonce
			if err := a.at("begun"); err != nil {
				return err
			}
		}
		r, err = a.finish(ctx, id, r)
		switch {
		case ours && (errors.Is(err, errRestart) || err == nil && (r.state == 0 || r.nonce != mine)):
			// Undone under us, or by a caller that found it abandoned; and
			// then maybe another call's attempt, with its own lines, took
			// the ID and was finished here: it is not this call's to claim.
			continue
		case ours && err != nil:
			return err
		case ours:
			// This call began the attempt that was committed, here or by
			// a caller resuming it: it applied the order, even if others
			// have closed it since.
			return nil
		case compared && err != nil:
			return err // settled, and its lost seal still not redone
		case compared:
			return a.answer(id, r)
		case err != nil && !errors.Is(err, errRestart) && !refused(err):
			return err
		}
		// An attempt of an earlier call, now settled or gone: begin again,
		// to compare with it or to try afresh.
	}
	return fmt.Errorf("%w: the attempts at order %q kept being undone", stockguard.ErrContention, id)
}

// window is how long a two-phase attempt may stay pending.
func (a *Atomic) window() time.Duration { return cmp.Or(a.pending, pendingWindow) }

// answer is a Take's, Hold's or Restock's reply for the order it settled
// (r: h, t, r or e).
func (a *Atomic) answer(id string, r *record) error {
	if r.state == 'r' || r.state == 'e' {
		return errtext.Closed(id, orderState(r.state))
	}
	return nil
}

// settleRemote applies op ("confirm", "return", "order") to the two-phase
// order id, finishing or undoing it first if it was left pending.
func (a *Atomic) settleRemote(ctx context.Context, op, id string) (*record, error) {
	first := "view"
	if op == "return" {
		first = "arming" // in the same round trip (see returnRemote)
	}
	r, err := a.recordOp(ctx, id, first)
	if err != nil {
		return nil, err
	}
	r, err = a.finish(ctx, id, r)
	switch {
	case err != nil && !errors.Is(err, errRestart) && !refused(err):
		return nil, err
	case err != nil || r.state == 0:
		return nil, errtext.UnknownOrder(id)
	case r.kind == kindRestock:
		return nil, errtext.Mismatch(id, "Restock")
	}
	switch {
	case op == "confirm" && r.state == 'h':
		if r, err = a.recordOp(ctx, id, "confirm"); err != nil {
			return nil, err
		}
		switch {
		case r.state == 't':
			if err := a.at("confirmed"); err != nil {
				return nil, err
			}
			if err := a.tidy(ctx, id, r, "finalize"); err != nil {
				return nil, pending(err)
			}
		case r.flag == "expired":
			// Its lines are due at its deadline: the next reader of
			// their SKUs gives back any this misses.
			_ = a.tidy(ctx, id, r, "undo")
		}
	case op == "return" && (r.state == 'r' || r.state == 'e'):
		// Decided before: its lines may not all have heard (a client that
		// died, a reader's stale view). Giving back is idempotent, so
		// every later Return of the order finishes the job.
		if err := a.lineOps(ctx, id, r, "undo"); err != nil {
			return nil, err
		}
	case op == "return" && (r.state == 'h' || r.state == 't'):
		if r, err = a.returnRemote(ctx, id, r); err != nil {
			return nil, err
		}
	}
	return r, nil
}

// returnRemote returns the two-phase order id, held or taken as r says
// (read by the record's arming op, which keeps a taken record from
// expiring until the decision). Its lines are made due first (armed):
// should this client die or stall
// before the record decides, the SKU side asks the record and keeps them
// taken or gives them back, whichever it says; a reader that finds them
// armed past the grace disarms the record first, which refuses this
// decision (orders_record.lua), and then this call arms again. So when the
// record says returned, every line was armed since and still is, or has
// been given back: whatever reads its SKU next gives it back if the
// give-back below does not reach it, and the Return answers nil.
func (a *Atomic) returnRemote(ctx context.Context, id string, r *record) (*record, error) {
	if r.state == 't' && r.sealed {
		// Sealed since this call read it (it resumed the take): the
		// record may not expire while lines wait armed for it.
		var err error
		if r, err = a.recordOp(ctx, id, "arming"); err != nil {
			return nil, err
		}
		if r.state != 't' {
			// Returned by another call meanwhile, whose lines may not
			// all have heard.
			if err := a.lineOps(ctx, id, r, "undo"); err != nil {
				return nil, err
			}
			return r, nil
		}
	}
	for range 3 {
		if err := a.lineOps(ctx, id, r, "arm"); err != nil {
			switch {
			case errors.Is(err, errLineGone) && r.state == 't':
				return nil, a.forgotten(ctx, id, r)
			case errors.Is(err, errLineGone):
				// A held line's record has no TTL: only eviction or a
				// hand outside this package removes it.
				return nil, fmt.Errorf("%w: a line record of the held order %q is missing, nothing decided: %w",
					stockguard.ErrUnavailable, id, err)
			}
			return nil, err
		}
		if err := a.at("armed"); err != nil {
			return nil, err
		}
		next, err := a.recordOp(ctx, id, "return", r.disarms)
		switch {
		case err != nil:
			return nil, err
		case next.flag == "disarmed":
			r = next // read before the next arming
			continue
		}
		if err := a.at("decided"); err != nil {
			return nil, err
		}
		// Its errors are dropped: the armed lines it misses are due, and
		// the next read of their SKUs gives them back (see above).
		_ = a.tidy(ctx, id, next, "undo")
		return next, nil
	}
	return nil, fmt.Errorf("%w: readers kept disarming the return of %q", stockguard.ErrContention, id)
}

// forgotten answers a Return of the taken order r that found a line record
// gone: a taken line's record expires a retention after its line heard so,
// which is before the order's record does (sealed after its lines) or, when
// the seal was lost, long before. The order is past its retention and
// nothing may come back: the lines this Return armed are taken again, the
// record is sealed so that it expires, and the Return answers
// ErrUnknownOrder.
func (a *Atomic) forgotten(ctx context.Context, id string, r *record) error {
	if err := a.lineOps(ctx, id, r, "unarm"); err != nil {
		return err
	}
	if _, err := a.recordOp(ctx, id, "seal", r.nonce); err != nil {
		return err
	}
	return fmt.Errorf("%w, past its retention (its line records expired)", errtext.UnknownOrder(id))
}

// finish drives the record r of id out of the protocol's transient states:
// a pending attempt is resumed (its lines taken again, idempotently, then
// committed) or, when a line is refused, undone; an undoing one is undone
// and its record deleted (r.state 0), leaving the tombstone of a refusal.
// It returns the record as it left it and, for an attempt undone because a
// line was refused, that refusal; or errRestart when the attempt was
// undone under it.
func (a *Atomic) finish(ctx context.Context, id string, r *record) (*record, error) {
	var refusal error
	for {
		switch r.state {
		case 'u':
			if err := a.undoLines(ctx, id, r); err != nil {
				return nil, pending(err)
			}
			next, err := a.recordOp(ctx, id, "drop", r.nonce, a.bounds.tombstone())
			if err != nil {
				return nil, pending(err)
			}
			if next.state == 0 || next.nonce == r.nonce {
				return next, refusal
			}
			r = next // someone else's new attempt: finish it too
		case 'p':
			why, err := a.takeLines(ctx, id, r)
			if err != nil {
				return nil, pending(err)
			}
			op := "commit"
			if why != nil {
				op, refusal = "abort", why
			} else if err := a.at("taken"); err != nil {
				return nil, err
			}
			attempt := r
			if r, err = a.recordOp(ctx, id, op, attempt.nonce); err != nil {
				return nil, pending(err)
			}
			switch {
			case r.nonce != attempt.nonce:
				// Undone and deleted by other callers while this one took
				// lines, which their undo may have missed: give them back.
				if err := a.undoLines(ctx, id, attempt); err != nil {
					return nil, pending(err)
				}
			case r.state == 'r' || r.state == 'e':
				// Closed (returned, expired) by other callers while this
				// one took lines, which their undo may have missed.
				if err := a.lineOps(ctx, id, attempt, "undo"); err != nil {
					return nil, pending(err)
				}
			}
			if r.state == 't' && r.kind == kindTake {
				if err := a.at("committed"); err != nil {
					return nil, err
				}
				if err := a.tidy(ctx, id, r, "finalize"); err != nil {
					return nil, pending(err)
				}
			}
			if r.state != 'u' {
				refusal = nil // committed, by this call or by another
			}
		default:
			switch {
			case r.flag == "expired":
				// Its lines are due at its deadline: the next reader of
				// their SKUs gives back any this misses.
				_ = a.tidy(ctx, id, r, "undo")
			case r.state == 't' && !r.sealed && r.flag != "arming":
				// A finalize or the seal was lost, and nothing else seals
				// the record once its lines have left the holds. (A
				// Return unsealed it on purpose: see returnRemote.)
				if err := a.tidy(ctx, id, r, "finalize"); err != nil {
					return nil, pending(err)
				}
			}
			return r, nil
		}
	}
}

// takeLines takes (or restocks) every line of the pending attempt r, in
// parallel, each in its own slot. It returns why a line was refused
// (ErrInsufficientStock, ErrUnknownSKU, ErrInvalidRequest for a restock
// past MaxQty, errRestart), or else any other error.
func (a *Atomic) takeLines(ctx context.Context, id string, r *record) (refusal, err error) {
	// A hold's lines are due at the pending deadline too: should the
	// attempt be abandoned, they come back then, not at a distant deadline.
	due := r.pending
	if r.kind == kindHold {
		due = min(due, r.deadline)
	}
	errs := forLines(r.lines, func(_ int, l stockguard.Line) error {
		return a.withResolve(ctx, func(decide string) (string, []string, string, error) {
			_, expiry := a.bounds.stamp(ctx)
			args := []any{"take", id, r.nonce, l.Qty, r.in(due), decide, expiry, r.at(due)}
			if r.kind == kindRestock {
				// The line says the units were added for as long as a
				// retry may resume the attempt: the record's lifetime.
				args = []any{"restock", id, r.nonce, l.Qty, (a.window() + a.retention).Milliseconds(), expiry}
			}
			reply, err := lineScript.Run(ctx, a.scripts, a.lineKeys(l.SKU, id), args...).Slice()
			if err != nil {
				return "", nil, "", redisx.Classify(ctx, err, redisx.Write)
			}
			switch code := replyInt(reply, 0); code {
			case 0:
				return "", nil, "", nil
			case codeMore:
				return "", nil, replyString(reply, 1), nil
			case codeResolve:
				return l.SKU, replyStrings(reply, 1), "", nil
			case codeLineUndone, codeLineNewer:
				return "", nil, "", errRestart
			case codeStale:
				return "", nil, "", errStale
			default:
				if err := a.refusal(code, l); err != nil {
					return "", nil, "", err
				}
				return "", nil, "", unexpected(reply)
			}
		})
	})
	for _, e := range errs {
		switch {
		case refused(e) || errors.Is(e, errRestart):
			// Undoing is safe even beside a line whose outcome is unknown:
			// its undo leaves a tombstone that a late take cannot pass.
			refusal = cmp.Or(refusal, e)
		case e != nil:
			err = cmp.Or(err, e)
		}
	}
	if refusal != nil {
		return refusal, nil
	}
	return nil, err
}

// undoLines gives back the lines of the undoing attempt r, each leaving a
// tombstone that no take of the attempt passes: whichever call undoes it,
// others may have resumed the attempt and have takes of its lines on
// their way — to a line this call took, or one refused to it.
func (a *Atomic) undoLines(ctx context.Context, id string, r *record) error {
	tomb := a.lineTomb()
	return errors.Join(forLines(r.lines, func(_ int, l stockguard.Line) error {
		return a.lineOp(ctx, id, r, l, "undo", tomb)
	})...)
}

// lineTomb is how long the tombstone of an undone attempt's line is kept
// (ms): past the pending window, in which the attempt may be resumed, and
// past the expiry of any take sent before it.
func (a *Atomic) lineTomb() string {
	return strconv.FormatInt(max(a.window(), a.bounds.validity+2*a.bounds.skew).Milliseconds(), 10)
}

// lineOps runs op ("undo", "finalize", "arm"; see orders_line.lua) on
// every line of r, in parallel, and returns the first error. Its undo
// follows the record's decision to close the order (returned, expired),
// and leaves a tombstone for as long as the record is kept: a caller still
// resuming the attempt can then not take its lines again, not even for a
// moment.
func (a *Atomic) lineOps(ctx context.Context, id string, r *record, op string) error {
	arg := strconv.FormatInt(a.retention.Milliseconds(), 10)
	return errors.Join(forLines(r.lines, func(_ int, l stockguard.Line) error {
		return a.lineOp(ctx, id, r, l, op, arg)
	})...)
}

// lineOp runs op with its argument arg on the line l of r.
func (a *Atomic) lineOp(ctx context.Context, id string, r *record, l stockguard.Line, op, arg string) error {
	reply, err := lineScript.Run(ctx, a.scripts, a.lineKeys(l.SKU, id), op, id, r.nonce, arg).Slice()
	if err != nil {
		return redisx.Classify(ctx, err, redisx.Write)
	}
	return lineError(reply, a, l)
}

// tidy runs op on r's lines once the record has decided their fate, and
// once every line has heard that the order is taken, seals the record (see
// orders_record.lua): until then it does not expire, since its absence
// would tell the lines to give their units back. It returns the first
// error. A line it does not reach stays listed as due in its SKU's holds,
// and whatever next needs that SKU's units asks the record and does the
// same; but once every line has left the holds, only a call under the ID
// seals the record, so the callers that acted on the order report a
// failed seal. A line a Return armed keeps the record unsealed, with no
// error: that Return decides, or a reader disarms it and seals.
func (a *Atomic) tidy(ctx context.Context, id string, r *record, op string) error {
	errs := forLines(r.lines, func(_ int, l stockguard.Line) error {
		return a.lineOp(ctx, id, r, l, op, strconv.FormatInt(a.retention.Milliseconds(), 10))
	})
	armed := false
	for i, err := range errs {
		if errors.Is(err, errLineArmed) {
			armed, errs[i] = true, nil
		}
	}
	if err := errors.Join(errs...); err != nil || armed || op != "finalize" {
		return err
	}
	if err := a.at("finalized"); err != nil {
		return err
	}
	_, err := a.recordOp(ctx, id, "seal", r.nonce)
	return err
}

// at is the test hook at a named point of the protocol.
func (a *Atomic) at(point string) error {
	if a.hook == nil {
		return nil
	}
	return a.hook(point)
}

// Errors of orders_line.lua's replies that its callers act on.
var (
	errLineArmed = errors.New("redislock: a Return armed the line") // finalize: codeLineArmed
	errLineGone  = errors.New("redislock: the line record is gone") // arm: codeLineGone
)

// lineError is the error of a reply of orders_line.lua: nil for a
// non-negative code.
func lineError(reply []any, a *Atomic, l stockguard.Line) error {
	code := replyInt(reply, 0)
	switch code {
	case codeLineArmed:
		return errLineArmed
	case codeLineGone:
		return errLineGone
	}
	if code >= 0 {
		return nil
	}
	if err := a.refusal(code, l); err != nil {
		return err
	}
	return unexpected(reply)
}

// refused reports whether err is a line's refusal: nothing taken there.
func refused(err error) bool {
	return errors.Is(err, stockguard.ErrInsufficientStock) || errors.Is(err, stockguard.ErrUnknownSKU) ||
		errors.Is(err, stockguard.ErrInvalidRequest)
}

// pending is err, which stopped an order between phases, as the caller
// sees it: the order may or may not end applied (a retry finishes or
// undoes it; its deadline undoes it).
func pending(err error) error {
	if errors.Is(err, stockguard.ErrOutcomeUnknown) {
		return err
	}
	return fmt.Errorf("%w: the order was left pending (a retry finishes or undoes it, its deadline undoes it): %v",
		stockguard.ErrOutcomeUnknown, err)
}

// unexpected is the error of a reply no script sends: wrapping
// ErrOutcomeUnknown, since nothing can be said of what it did.
func unexpected(reply []any) error {
	return fmt.Errorf("%w: redislock: unexpected reply %v", stockguard.ErrOutcomeUnknown, reply)
}

// forLines calls fn for each line, in parallel when there are several, and
// returns their errors in line order.
func forLines(lines []stockguard.Line, fn func(int, stockguard.Line) error) []error {
	errs := make([]error, len(lines))
	if len(lines) == 1 {
		errs[0] = fn(0, lines[0])
		return errs
	}
	var wg sync.WaitGroup
	for i, l := range lines {
		wg.Go(func() { errs[i] = fn(i, l) })
	}
	wg.Wait()
	return errs
}
