package counterexample

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/stockguard/stockguard"
	"github.com/stockguard/stockguard/strategy"
)

// The order counterexamples below wrap a sound stockguard.Orders and break
// it on one path each: a refused order, an expired hold, a restock, a late
// Return. Those that keep records of their own share them between the
// instances over one store through a Book, as an application's own table
// would be shared.

// Book is an application's own record of some orders, shared by its
// instances over one store. The zero value is empty and ready.
type Book struct {
	mu sync.Mutex
	m  map[string]*entry
}

type entry struct {
	lines     []stockguard.Line
	deadline  time.Time
	confirmed bool
	closed    stockguard.OrderState // OrderReturned or OrderExpired once closed
	tries     int
}

// get returns id's entry, making it with make when there is none.
func (b *Book) get(id string, make func() *entry) *entry {
	if b.m == nil {
		b.m = map[string]*entry{}
	}
	e, ok := b.m[id]
	if !ok && make != nil {
		e = make()
		b.m[id] = e
	}
	return e
}

// Phantom records an order in the application's table before the store
// takes its stock, and does not delete the row when the store refuses it.
//
// How it breaks: a refused order — the buyer was told no, no stock moved —
// reads back as taken. The audit reads refused orders back and finds a
// phantom where there must be no order.
type Phantom struct {
	stockguard.Orders
	book *Book
}

// NewPhantom wraps inner, keeping its rows in book (one per store).
func NewPhantom(inner stockguard.Orders, book *Book) *Phantom {
	return &Phantom{Orders: inner, book: book}
}

func (c *Phantom) record(id string, lines []stockguard.Line, err error) error {
	if errors.Is(err, stockguard.ErrInsufficientStock) {
		c.book.mu.Lock()
		c.book.get(id, func() *entry { return &entry{lines: strategy.SortedLines(lines)} })
		c.book.mu.Unlock()
	}
	return err
}

// Take takes lines; a refused order's row stays.
func (c *Phantom) Take(ctx context.Context, id string, lines ...stockguard.Line) error {
	return c.record(id, lines, c.Orders.Take(ctx, id, lines...))
}

// Hold holds lines; a refused order's row stays.
func (c *Phantom) Hold(ctx context.Context, id string, ttl time.Duration, lines ...stockguard.Line) error {
	return c.record(id, lines, c.Orders.Hold(ctx, id, ttl, lines...))
}

// Order reports the store's order or, when it has none, the row.
func (c *Phantom) Order(ctx context.Context, id string) (stockguard.OrderInfo, error) {
	info, err := c.Orders.Order(ctx, id)
	if !errors.Is(err, stockguard.ErrUnknownOrder) {
		return info, err
	}
	c.book.mu.Lock()
	defer c.book.mu.Unlock()
	if e := c.book.get(id, nil); e != nil {
		return stockguard.OrderInfo{ID: id, State: stockguard.OrderTaken, Lines: e.lines}, nil
	}
	return info, err
}

// LazyExpiry keeps a hold as a take plus a deadline in the application's
// table, and gives an expired hold's units back when the order is next
// touched — Order, Confirm, Return or a repeat — instead of at its
// deadline.
//
// How it breaks: a hold nobody touches after its deadline keeps its units
// out of the stock; whoever reads the order sees it expired, and by then
// the units are back. The audit reads the stock before any order.
type LazyExpiry struct {
	stockguard.Orders
	book *Book
}

// NewLazyExpiry wraps inner, keeping its holds in book (one per store).
func NewLazyExpiry(inner stockguard.Orders, book *Book) *LazyExpiry {
	return &LazyExpiry{Orders: inner, book: book}
}

// settle returns id's hold, giving its units back first when its deadline
// has passed; nil when id is not a hold.
func (c *LazyExpiry) settle(ctx context.Context, id string) (*entry, error) {
	c.book.mu.Lock()
	defer c.book.mu.Unlock()
	e := c.book.get(id, nil)
	if e == nil || e.confirmed || e.closed != 0 || time.Now().Before(e.deadline) {
		return e, nil
	}
	if err := c.Orders.Return(ctx, id); err != nil {
		return nil, err
	}
	e.closed = stockguard.OrderExpired
	return e, nil
}

// Hold takes lines and notes the deadline.
func (c *LazyExpiry) Hold(ctx context.Context, id string, ttl time.Duration, lines ...stockguard.Line) error {
	if err := strategy.ValidateHold(id, ttl, lines); err != nil {
		return err
	}
	e, err := c.settle(ctx, id)
	switch {
	case err != nil:
		return err
	case e != nil && e.closed != 0:
		return fmt.Errorf("%w: %q", stockguard.ErrOrderClosed, id)
	}
	if err := c.Orders.Take(ctx, id, lines...); err != nil {
		return err
	}
	c.book.mu.Lock()
	defer c.book.mu.Unlock()
	c.book.get(id, func() *entry { return &entry{deadline: time.Now().Add(ttl)} })
	return nil
}

// Confirm keeps a hold for good, unless its deadline passed.
func (c *LazyExpiry) Confirm(ctx context.Context, id string) error {
	e, err := c.settle(ctx, id)
	switch {
	case err != nil:
		return err
	case e == nil:
		return c.Orders.Confirm(ctx, id)
	case e.closed != 0:
		return fmt.Errorf("%w: %q", stockguard.ErrOrderClosed, id)
	}
	c.book.mu.Lock()
	defer c.book.mu.Unlock()
	e.confirmed = true
	return nil
}

// Return gives an order back; an expired hold was given back by settle.
func (c *LazyExpiry) Return(ctx context.Context, id string) error {
	e, err := c.settle(ctx, id)
	switch {
	case err != nil:
		return err
	case e != nil && e.closed != 0:
		return nil
	}
	if err := c.Orders.Return(ctx, id); err != nil {
		return err
	}
	if e != nil {
		c.book.mu.Lock()
		defer c.book.mu.Unlock()
		e.closed = stockguard.OrderReturned
	}
	return nil
}

// Order reports the order, a hold as held until confirmed or expired.
func (c *LazyExpiry) Order(ctx context.Context, id string) (stockguard.OrderInfo, error) {
	e, err := c.settle(ctx, id)
	if err != nil {
		return stockguard.OrderInfo{}, err
	}
	info, err := c.Orders.Order(ctx, id)
	if err != nil || e == nil {
		return info, err
	}
	c.book.mu.Lock()
	defer c.book.mu.Unlock()
	info.Deadline = e.deadline
	switch {
	case e.closed != 0:
		info.State = e.closed
	case !e.confirmed:
		info.State = stockguard.OrderHeld
	}
	return info, nil
}

// Every PutBackEvery-th acknowledged Take of a FlakyRestock gives its
// units back; each restock ID answers ErrOutcomeUnknown UnknownTries
// times before it is applied.
const (
	PutBackEvery = 200
	UnknownTries = 8
)

// FlakyRestock is a store whose restocks time out before they are sent,
// the first UnknownTries times each, and which silently gives the units of
// a take back now and then (a compensation job run on the wrong orders).
//
// How it breaks: the put-back units are stock nobody accounts for. An
// audit that counts each restock of unknown outcome as "maybe applied"
// gives that much room, and hides them; one that repeats every restock
// under its ID until it answers counts restocks exactly and finds them.
type FlakyRestock struct {
	stockguard.Orders
	book  *Book
	takes atomic.Int64
}

// NewFlakyRestock wraps inner, counting restock tries in book (one per
// store). Its first acknowledged Take, and every PutBackEvery-th after,
// is put back.
func NewFlakyRestock(inner stockguard.Orders, book *Book) *FlakyRestock {
	return &FlakyRestock{Orders: inner, book: book}
}

// Restock answers unknown, having done nothing, the first UnknownTries
// times id is tried.
func (c *FlakyRestock) Restock(ctx context.Context, id string, sku string, qty int64) error {
	if err := strategy.ValidateRestock(id, sku, qty); err != nil {
		return err
	}
	c.book.mu.Lock()
	e := c.book.get(id, func() *entry { return &entry{} })
	e.tries++
	tries := e.tries
	c.book.mu.Unlock()
	if tries <= UnknownTries {
		return fmt.Errorf("%w: restock %q timed out", stockguard.ErrOutcomeUnknown, id)
	}
	return c.Orders.Restock(ctx, id, sku, qty)
}

// Take takes lines, and now and then silently restocks them.
func (c *FlakyRestock) Take(ctx context.Context, id string, lines ...stockguard.Line) error {
	if err := c.Orders.Take(ctx, id, lines...); err != nil {
		return err
	}
	if c.takes.Add(1)%PutBackEvery == 1 {
		giveBack(ctx, c.Orders, id, "back", lines)
	}
	return nil
}

// giveBack puts lines back into the stock under restock IDs derived from
// id, outside any order's record.
func giveBack(ctx context.Context, inner stockguard.Orders, id, why string, lines []stockguard.Line) {
	for i, l := range lines {
		inner.Restock(ctx, id+"#"+why+strconv.Itoa(i), l.SKU, l.Qty)
	}
}

// ReturnExpiredTwice gives an order's units back on Return without
// looking whether its hold expired, which gave them back already.
//
// How it breaks: a Return after a hold's deadline puts its units back a
// second time: stock appears from nowhere (oversold). Only a Return made
// after a deadline takes the path.
type ReturnExpiredTwice struct{ stockguard.Orders }

// NewReturnExpiredTwice wraps inner.
func NewReturnExpiredTwice(inner stockguard.Orders) *ReturnExpiredTwice {
	return &ReturnExpiredTwice{inner}
}

// Return returns id; an expired hold's units go back again.
func (c *ReturnExpiredTwice) Return(ctx context.Context, id string) error {
	info, err := c.Orders.Order(ctx, id)
	if err == nil && info.State == stockguard.OrderExpired {
		giveBack(ctx, c.Orders, id, "again", info.Lines)
		return nil
	}
	return c.Orders.Return(ctx, id)
}
