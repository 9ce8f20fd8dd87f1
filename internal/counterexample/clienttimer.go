package counterexample

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/stockguard/stockguard"
	"github.com/stockguard/stockguard/strategy"
)

// ClientTimer is a checkout client that holds a cart by taking it and
// starting a timer in its own process to give it back unless confirmed —
// instead of a hold whose deadline the store keeps.
//
// How it breaks: the timer lives only as long as the process. When the
// client dies (here every dropEvery-th hold of an instance loses its
// timer, as a restart would), its holds never expire: their units never
// come back. The audit finds such orders still held after their deadline
// and reports their units lost.
type ClientTimer struct {
	stockguard.Orders // the inner store: Take and the rest unchanged
	book              *HoldBook
	dropEvery         int64
	n                 atomic.Int64
}

var _ stockguard.Orders = (*ClientTimer)(nil)

// DefaultDropEvery is the share of timers NewClientTimer drops: one in
// this many holds.
const DefaultDropEvery = 5

// HoldBook is the application's own record of its holds, shared by its
// instances (a table of theirs): which orders are holds, their deadlines,
// which expired.
type HoldBook struct {
	mu    sync.Mutex
	holds map[string]*clientHold
}

type clientHold struct {
	deadline  time.Time
	timer     *time.Timer // nil once stopped, fired or dropped
	expired   bool
	confirmed bool
}

// NewHoldBook returns an empty book.
func NewHoldBook() *HoldBook { return &HoldBook{holds: map[string]*clientHold{}} }

// NewClientTimer wraps inner, keeping its holds in book (share one book
// between the instances over one store); every dropEvery-th hold of this
// instance loses its timer (dropEvery < 1: DefaultDropEvery).
func NewClientTimer(inner stockguard.Orders, book *HoldBook, dropEvery int) *ClientTimer {
	if dropEvery < 1 {
		dropEvery = DefaultDropEvery
	}
	return &ClientTimer{Orders: inner, book: book, dropEvery: int64(dropEvery)}
}

// Hold takes lines for good and starts a timer to return them after ttl.
func (c *ClientTimer) Hold(ctx context.Context, id string, ttl time.Duration, lines ...stockguard.Line) error {
	if err := strategy.ValidateHold(id, ttl, lines); err != nil {
		return err
	}
	if err := c.Orders.Take(ctx, id, lines...); err != nil {
		return err
	}
	c.book.mu.Lock()
	defer c.book.mu.Unlock()
	if _, ok := c.book.holds[id]; ok {
		return nil // a repeat
	}
	h := &clientHold{deadline: time.Now().Add(ttl)}
	c.book.holds[id] = h
	if c.n.Add(1)%c.dropEvery != 0 { // the bug: else the timer dies with the process
		h.timer = time.AfterFunc(ttl, func() { c.expire(id, h) })
	}
	return nil
}

func (c *ClientTimer) expire(id string, h *clientHold) {
	c.book.mu.Lock()
	if h.confirmed || h.timer == nil {
		c.book.mu.Unlock()
		return
	}
	h.timer, h.expired = nil, true
	c.book.mu.Unlock()
	c.Orders.Return(context.Background(), id)
}

// settle stops id's timer, if it is a hold still running, and reports
// whether it had expired.
func (c *ClientTimer) settle(id string, confirm bool) (expired bool) {
	c.book.mu.Lock()
	defer c.book.mu.Unlock()
	h, ok := c.book.holds[id]
	if !ok {
		return false
	}
	if h.timer != nil {
		h.timer.Stop()
		h.timer = nil
	}
	if confirm && !h.expired {
		h.confirmed = true
	}
	return h.expired
}

// Confirm stops the timer; an expired hold is ErrOrderClosed.
func (c *ClientTimer) Confirm(ctx context.Context, id string) error {
	if err := strategy.ValidateID(id); err != nil {
		return err
	}
	if c.settle(id, true) {
		return stockguard.ErrOrderClosed
	}
	return c.Orders.Confirm(ctx, id)
}

// Return stops the timer and returns the order.
func (c *ClientTimer) Return(ctx context.Context, id string) error {
	if err := strategy.ValidateID(id); err != nil {
		return err
	}
	c.settle(id, false)
	return c.Orders.Return(ctx, id)
}

// Order reports the order, held until confirmed or expired by the book.
func (c *ClientTimer) Order(ctx context.Context, id string) (stockguard.OrderInfo, error) {
	info, err := c.Orders.Order(ctx, id)
	if err != nil {
		return info, err
	}
	c.book.mu.Lock()
	defer c.book.mu.Unlock()
	if h, ok := c.book.holds[id]; ok {
		info.Deadline = h.deadline
		switch {
		case h.expired:
			info.State = stockguard.OrderExpired
		case info.State == stockguard.OrderTaken && !h.confirmed:
			info.State = stockguard.OrderHeld
		}
	}
	return info, nil
}
