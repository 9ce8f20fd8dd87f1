package counterexample

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/stockguard/stockguard"
	"github.com/stockguard/stockguard/strategy"
)

// RetryWithoutID is a checkout client that retries a lost reply as a fresh
// order: the store's Take and Hold are exactly-once under an ID, but the
// client mints a new ID per attempt (a request ID, a database sequence)
// instead of reusing the order's.
//
// How it breaks: when a reply is lost after the store applied the order —
// here every lossEvery-th successful call, reported as ErrOutcomeUnknown as
// a timed-out connection would — the retry takes the units again. The order
// holds twice its lines: the audit reports the excess as duplicated units.
type RetryWithoutID struct {
	parted    // one record per try
	lossEvery int64
	n         atomic.Int64
}

var _ stockguard.Orders = (*RetryWithoutID)(nil)

// DefaultLossEvery is the share of replies NewRetryWithoutID loses: one in
// this many successful takes and holds.
const DefaultLossEvery = 10

// NewRetryWithoutID wraps inner; every lossEvery-th successful Take or Hold
// of this instance loses its reply (lossEvery < 1: DefaultLossEvery).
func NewRetryWithoutID(inner stockguard.Orders, lossEvery int) *RetryWithoutID {
	if lossEvery < 1 {
		lossEvery = DefaultLossEvery
	}
	return &RetryWithoutID{parted: parted{inner}, lossEvery: int64(lossEvery)}
}

// naive makes call under a fresh record ID, and once more under another
// when the reply was lost.
func (c *RetryWithoutID) naive(ctx context.Context, id string, call func(ctx context.Context, id string) error) error {
	if err := strategy.ValidateID(id); err != nil {
		return err
	}
	err := call(ctx, partID(id, 0))
	if err == nil && c.n.Add(1)%c.lossEvery == 0 {
		err = fmt.Errorf("%w: reply lost", stockguard.ErrOutcomeUnknown)
	}
	if strategy.Contract(err) != stockguard.ErrOutcomeUnknown {
		return err
	}
	return call(ctx, partID(id, 1)) // the bug: a new ID for the same order
}

// Take takes lines under a fresh record ID, retried under another.
func (c *RetryWithoutID) Take(ctx context.Context, id string, lines ...stockguard.Line) error {
	return c.naive(ctx, id, func(ctx context.Context, pid string) error { return c.Orders.Take(ctx, pid, lines...) })
}

// Hold holds lines under a fresh record ID, retried under another.
func (c *RetryWithoutID) Hold(ctx context.Context, id string, ttl time.Duration, lines ...stockguard.Line) error {
	return c.naive(ctx, id, func(ctx context.Context, pid string) error { return c.Orders.Hold(ctx, pid, ttl, lines...) })
}
