package redislock

import (
	"fmt"
	"time"
)

// DefaultOrderRetention is how long the Orders of NewAtomic and NewBatched
// remember an order ID after its last change (see WithOrderRetention).
const DefaultOrderRetention = 7 * 24 * time.Hour

// MinOrderRetention is the shortest retention WithOrderRetention accepts.
const MinOrderRetention = time.Second

// DefaultAttemptValidity is how long after it was sent an order attempt of
// the Orders of NewAtomic and NewBatched may still be applied when its
// context has no earlier deadline (see WithAttemptValidity).
const DefaultAttemptValidity = 5 * time.Second

// DefaultClockSkew is how far the Orders of NewAtomic and NewBatched assume
// the clocks of their clients and of the Redis servers may differ (see
// WithClockSkew).
const DefaultClockSkew = 250 * time.Millisecond

// orderOptions are the settings of Atomic's Orders.
type orderOptions struct {
	retention time.Duration // 0 means DefaultOrderRetention
	stream    string        // WithOrderStream: the stream key; "" streams nothing
	validity  time.Duration // 0 means DefaultAttemptValidity
	skew      time.Duration // 0 means DefaultClockSkew
}

// WithOrderRetention sets how long an order record is kept after its last
// change (taken, confirmed, returned, expired; a hold's record is kept
// this long past its deadline). Within it, every call under the ID is
// answered from the record; past it, the ID is forgotten and a Take, Hold
// or Restock under it applies afresh, so keep it well beyond any retry.
// Default DefaultOrderRetention; at least MinOrderRetention, or NewAtomic
// returns an error wrapping stockguard.ErrInvalidRequest.
func WithOrderRetention(d time.Duration) Option {
	return func(o *options) {
		o.given |= optOrderRetention
		if d < MinOrderRetention {
			o.fail(fmt.Errorf("order retention %v below %v", d, MinOrderRetention))
			return
		}
		o.orders.retention = d
	}
}

// WithOrderStream makes the Orders of an Atomic or a Batched append every final effect to the
// Redis Stream key, in the same script as the effect, so that a consumer
// can apply it elsewhere (package tiered does, to a durable Orders): a Take,
// and a Confirm that makes a hold taken, append {o: "T", i: id, "=<sku>":
// qty and "^<sku>": the SKU's level right after, per line}; a Return of a
// taken order appends {o: "R", i: id, "=<sku>": qty per line}. Holds,
// expiries and the Return of a hold append nothing (their units never left
// for good), and neither does a retried call that changes nothing, so the
// stream carries each order's effect once. The key is used as given (no
// prefix); nothing trims the stream (trimming would drop effects not yet
// applied: the consumer deletes what it applied).
//
// With a stream, Decrement is refused (it has no ID a consumer could apply
// exactly once: take a one-line order instead), and so is an order whose
// keys — its record, its SKUs' keys and the stream — are not in one slot of
// a Redis Cluster (one script must write them all): both with an error
// wrapping stockguard.ErrInvalidRequest, before any I/O. An empty key makes
// NewAtomic and NewBatched return an error wrapping
// stockguard.ErrInvalidRequest.
func WithOrderStream(key string) Option {
	return func(o *options) {
		o.given |= optOrderStream
		if key == "" {
			o.fail(fmt.Errorf("empty order stream key"))
			return
		}
		o.orders.stream = key
	}
}

// WithAttemptValidity bounds how long after it was sent an attempt at a
// Take, Hold or Restock may still be applied: its deadline is the
// earlier of its context's deadline and d after it was sent (by the
// client's clock), and Redis does nothing with an attempt that reaches it
// later than its deadline plus the clock skew (WithClockSkew) — it answers
// stockguard.ErrContention, should the caller still listen. A refusal
// keeps its order ID fenced for d plus twice the skew (see Take). Default
// DefaultAttemptValidity; d must be positive, or NewAtomic returns an error
// wrapping stockguard.ErrInvalidRequest.
func WithAttemptValidity(d time.Duration) Option {
	return func(o *options) {
		o.given |= optAttemptValidity
		if d <= 0 {
			o.fail(fmt.Errorf("attempt validity %v not positive", d))
			return
		}
		o.orders.validity = d
	}
}

// WithClockSkew sets how far the clocks of the Atomic's clients and of the
// Redis servers that keep its orders may differ at most (Take's refusals
// are final only within it). An order ID refused at some time is fenced
// for attempts sent up to d after it by their client's clock: such an
// attempt answers stockguard.ErrContention, nothing applied, unless its
// caller can wait until then and try again, which it does. Default
// DefaultClockSkew; d must be positive, or NewAtomic returns an error
// wrapping stockguard.ErrInvalidRequest.
func WithClockSkew(d time.Duration) Option {
	return func(o *options) {
		o.given |= optClockSkew
		if d <= 0 {
			o.fail(fmt.Errorf("clock skew %v not positive", d))
			return
		}
		o.orders.skew = d
	}
}
