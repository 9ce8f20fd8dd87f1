package redislock

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/stockguard/stockguard"
)

// bounds make a refusal final against a late attempt (see Take): every
// attempt that may record an order — the one-slot order and restock
// scripts, the two-phase begin and line take — carries its fence point and
// its expiry, and every refusal leaves a tombstone under the order ID.
//
// An attempt sent at S by its client's clock carries the expiry
// min(ctx's deadline, S+validity) + skew, and Redis does nothing with it
// past then by its own clock (codeStale). A refusal, at R by the clock of
// the Redis that keeps the ID's record, leaves the field "x" = R in the
// record key (a hash with no other field) for validity + 2*skew; an
// attempt that meets it and carries the fence point S-skew <= R does
// nothing (codeFenced), and one sent later proceeds. With clocks within
// skew of each other, an attempt sent before the refusal has S <= R+skew,
// and reaches Redis by R+validity+2*skew or not at all: so it meets the
// tombstone.
type bounds struct {
	validity, skew time.Duration
}

// newBounds are the bounds of o, its defaults filled in.
func newBounds(o orderOptions) bounds {
	return bounds{validity: cmp.Or(o.validity, DefaultAttemptValidity), skew: cmp.Or(o.skew, DefaultClockSkew)}
}

// stamp returns the fence point and the expiry (us, the client's clock)
// of an attempt sent now under ctx.
func (b bounds) stamp(ctx context.Context) (fence, expiry int64) {
	now := time.Now()
	end := now.Add(b.validity)
	if dl, ok := ctx.Deadline(); ok && dl.Before(end) {
		end = dl
	}
	return now.Add(-b.skew).UnixMicro(), end.Add(b.skew).UnixMicro()
}

// tombstone is how long a refusal's tombstone is kept (ms, rounded up).
func (b bounds) tombstone() string {
	d := b.validity + 2*b.skew
	return strconv.FormatInt(int64((d+time.Millisecond-1)/time.Millisecond), 10)
}

// fencedError: the attempt met the tombstone of a refusal made at R (us,
// the record's clock) and did nothing; an attempt sent after R+skew by the
// client's clock is not fenced by it.
type fencedError struct{ after time.Time }

func (e *fencedError) Error() string {
	return fmt.Sprintf("redislock: the order ID was refused until %v, nothing applied", e.after)
}

// errKeptFenced: the order ID was refused again each time the attempt was
// sent after the last refusal.
var errKeptFenced = fmt.Errorf("%w: redislock: the order ID kept being refused by others, nothing applied", stockguard.ErrContention)

// errStale: the attempt reached Redis past its expiry and did nothing.
var errStale = fmt.Errorf("%w: redislock: the attempt reached Redis past its deadline, nothing applied", stockguard.ErrContention)

// fenced is the error of a script's codeFenced reply, whose element i is
// the time of the refusal.
func (b bounds) fenced(reply []any, i int) error {
	return &fencedError{after: time.UnixMicro(replyInt(reply, i)).Add(b.skew)}
}

// retryFenced runs attempt until it is not fenced by a refusal, waiting
// until the fence has passed by this client's clock between tries, as
// long as ctx allows; then a fenced attempt is ErrContention.
func (b bounds) retryFenced(ctx context.Context, attempt func() error) error {
	for range 3 {
		err := attempt()
		var f *fencedError
		if !errors.As(err, &f) {
			return err
		}
		if err := b.wait(ctx, f); err != nil {
			return err
		}
	}
	return errKeptFenced
}

// wait waits until the fence f has passed by this client's clock, or
// returns ErrContention at once when ctx's deadline comes first.
func (b bounds) wait(ctx context.Context, f *fencedError) error {
	wait := time.Until(f.after) + time.Millisecond
	if dl, ok := ctx.Deadline(); ok && time.Until(dl) < wait {
		return fmt.Errorf("%w: %v", stockguard.ErrContention, f)
	}
	return sleep(ctx, wait)
}
