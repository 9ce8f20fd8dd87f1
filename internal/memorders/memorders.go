// Package memorders is a correct in-memory stockguard.Orders: the reference
// the conformance suite's order cases are checked against.
package memorders

import (
	"context"
	"slices"
	"sync"
	"time"

	"github.com/stockguard/stockguard"
	"github.com/stockguard/stockguard/internal/errtext"
	"github.com/stockguard/stockguard/internal/room"
	"github.com/stockguard/stockguard/strategy"
)

// kind is the call that applied an order.
type kind int

const (
	kindTake kind = iota + 1
	kindHold
	kindRestock
)

func (k kind) String() string {
	return [...]string{kindTake: "Take", kindHold: "Hold", kindRestock: "Restock"}[k]
}

// order is what was applied under one ID.
type order struct {
	kind     kind
	lines    []stockguard.Line // in SKU order
	state    stockguard.OrderState
	deadline time.Time // holds only
}

// Store is an in-memory Orders guarded by one mutex: the single-process
// ideal every Orders strategy is measured against. Share one Store between
// the instances of a test, as two processes share one backend. Safe for
// concurrent use.
type Store struct {
	mu     sync.Mutex
	stock  map[string]int64
	orders map[string]*order
}

var _ stockguard.Orders = (*Store)(nil)

// New returns an empty Store.
func New() *Store {
	return &Store{stock: make(map[string]int64), orders: make(map[string]*order)}
}

// admit checks the context once the request is valid, so that bad input is
// ErrInvalidRequest whatever the context, and locks the store.
func (s *Store) admit(ctx context.Context, valid error) error {
	if valid != nil {
		return valid
	}
	if err := strategy.Canceled(ctx); err != nil {
		return err
	}
	s.mu.Lock()
	s.reclaim(time.Now())
	return nil
}

// reclaim gives back the units of every hold whose deadline has passed. It
// runs at the start of every call, so an expired hold is back before
// anything can read or take its units, with no sweeper.
func (s *Store) reclaim(now time.Time) {
	for _, o := range s.orders {
		if o.state == stockguard.OrderHeld && !now.Before(o.deadline) {
			o.state = stockguard.OrderExpired
			s.giveBack(o)
		}
	}
}

func (s *Store) giveBack(o *order) {
	for _, l := range o.lines {
		s.stock[l.SKU] += l.Qty
	}
}

// Decrement takes qty units of sku. It returns ErrInvalidRequest,
// ErrUnknownSKU, ErrInsufficientStock or ctx's error.
func (s *Store) Decrement(ctx context.Context, sku string, qty int64) error {
	if err := s.admit(ctx, strategy.Validate(sku, qty)); err != nil {
		return err
	}
	defer s.mu.Unlock()
	return s.take([]stockguard.Line{{SKU: sku, Qty: qty}})
}

// SetStock creates or overwrites sku's stock level. It returns
// ErrInvalidRequest (also when qty and the units out on open orders would
// pass MaxQty) or ctx's error.
func (s *Store) SetStock(ctx context.Context, sku string, qty int64) error {
	if err := s.admit(ctx, strategy.ValidateSet(sku, qty)); err != nil {
		return err
	}
	defer s.mu.Unlock()
	if err := room.Set(sku, qty, s.out(sku)); err != nil {
		return err
	}
	s.stock[sku] = qty
	return nil
}

// out is how many units of sku are out on open orders (held or taken),
// which may all come back: they count against MaxQty with the level.
func (s *Store) out(sku string) int64 {
	var n int64
	for _, o := range s.orders {
		if o.kind == kindRestock || !o.state.Open() {
			continue
		}
		for _, l := range o.lines {
			if l.SKU == sku {
				n += l.Qty
			}
		}
	}
	return n
}

// Stock returns sku's stock level, counting expired holds as back. It
// returns ErrInvalidRequest, ErrUnknownSKU or ctx's error.
func (s *Store) Stock(ctx context.Context, sku string) (int64, error) {
	if err := s.admit(ctx, strategy.ValidateSKU(sku)); err != nil {
		return 0, err
	}
	defer s.mu.Unlock()
	have, ok := s.stock[sku]
	if !ok {
		return 0, errtext.UnknownSKU(sku)
	}
	return have, nil
}

// take takes every line or none.
func (s *Store) take(lines []stockguard.Line) error {
	for _, l := range lines {
		have, ok := s.stock[l.SKU]
		switch {
		case !ok:
			return errtext.UnknownSKU(l.SKU)
		case have < l.Qty:
			return errtext.Insufficient(l.SKU, have, l.Qty)
		}
	}
	for _, l := range lines {
		s.stock[l.SKU] -= l.Qty
	}
	return nil
}

// Take takes every line for good under id, once. It returns
// ErrInvalidRequest, ErrUnknownSKU, ErrInsufficientStock, ErrOrderMismatch,
// ErrOrderClosed or ctx's error.
func (s *Store) Take(ctx context.Context, id string, lines ...stockguard.Line) error {
	if err := s.admit(ctx, strategy.ValidateTake(id, lines)); err != nil {
		return err
	}
	defer s.mu.Unlock()
	return s.place(id, kindTake, 0, lines)
}

// Hold takes every line under id until Confirm, Return or ttl has passed.
// It returns what Take returns.
func (s *Store) Hold(ctx context.Context, id string, ttl time.Duration, lines ...stockguard.Line) error {
	if err := s.admit(ctx, strategy.ValidateHold(id, ttl, lines)); err != nil {
		return err
	}
	defer s.mu.Unlock()
	return s.place(id, kindHold, ttl, lines)
}

// place applies a take or a hold under id, or answers a retry of one.
func (s *Store) place(id string, k kind, ttl time.Duration, lines []stockguard.Line) error {
	lines = strategy.SortedLines(lines)
	if o, ok := s.orders[id]; ok {
		switch {
		case o.kind != k || !slices.Equal(o.lines, lines):
			return errtext.Mismatch(id, o.kind.String())
		case !o.state.Open():
			return errtext.Closed(id, o.state)
		}
		return nil
	}
	if err := s.take(lines); err != nil {
		return err
	}
	o := &order{kind: k, lines: lines, state: stockguard.OrderTaken}
	if k == kindHold {
		o.state = stockguard.OrderHeld
		o.deadline = time.Now().Add(ttl)
	}
	s.orders[id] = o
	return nil
}

// lookup returns the take or hold applied under id.
func (s *Store) lookup(id string) (*order, error) {
	o, ok := s.orders[id]
	switch {
	case !ok:
		return nil, errtext.UnknownOrder(id)
	case o.kind == kindRestock:
		return nil, errtext.Mismatch(id, "Restock")
	}
	return o, nil
}

// Confirm makes the hold under id taken for good. It returns
// ErrInvalidRequest, ErrUnknownOrder, ErrOrderMismatch (a restock),
// ErrOrderClosed or ctx's error.
func (s *Store) Confirm(ctx context.Context, id string) error {
	if err := s.admit(ctx, strategy.ValidateID(id)); err != nil {
		return err
	}
	defer s.mu.Unlock()
	o, err := s.lookup(id)
	if err != nil {
		return err
	}
	if !o.state.Open() {
		return errtext.Closed(id, o.state)
	}
	o.state = stockguard.OrderTaken
	return nil
}

// Return gives the units of the order under id back, once. It returns
// ErrInvalidRequest, ErrUnknownOrder, ErrOrderMismatch (a restock) or ctx's
// error.
func (s *Store) Return(ctx context.Context, id string) error {
	if err := s.admit(ctx, strategy.ValidateID(id)); err != nil {
		return err
	}
	defer s.mu.Unlock()
	o, err := s.lookup(id)
	if err != nil {
		return err
	}
	if o.state.Open() {
		o.state = stockguard.OrderReturned
		s.giveBack(o)
	}
	return nil
}

// Restock adds qty units to a stocked sku once per id. It returns
// ErrInvalidRequest, ErrUnknownSKU, ErrOrderMismatch or ctx's error.
func (s *Store) Restock(ctx context.Context, id string, sku string, qty int64) error {
	if err := s.admit(ctx, strategy.ValidateRestock(id, sku, qty)); err != nil {
		return err
	}
	defer s.mu.Unlock()
	lines := []stockguard.Line{{SKU: sku, Qty: qty}}
	if o, ok := s.orders[id]; ok {
		if o.kind != kindRestock || !slices.Equal(o.lines, lines) {
			return errtext.Mismatch(id, o.kind.String())
		}
		return nil
	}
	have, ok := s.stock[sku]
	if !ok {
		return errtext.UnknownSKU(sku)
	}
	if err := room.Restock(sku, have, s.out(sku), qty); err != nil {
		return err
	}
	s.stock[sku] += qty
	s.orders[id] = &order{kind: kindRestock, lines: lines, state: stockguard.OrderTaken}
	return nil
}

// Order reports the order applied under id. It returns ErrInvalidRequest,
// ErrUnknownOrder or ctx's error.
func (s *Store) Order(ctx context.Context, id string) (stockguard.OrderInfo, error) {
	if err := s.admit(ctx, strategy.ValidateID(id)); err != nil {
		return stockguard.OrderInfo{}, err
	}
	defer s.mu.Unlock()
	o, ok := s.orders[id]
	if !ok {
		return stockguard.OrderInfo{}, errtext.UnknownOrder(id)
	}
	info := stockguard.OrderInfo{ID: id, State: o.state, Lines: slices.Clone(o.lines)}
	if o.state != stockguard.OrderTaken { // a confirmed hold expires no more
		info.Deadline = o.deadline
	}
	return info, nil
}

// Footprint returns the number of SKUs and orders the store holds: what a
// backend would count as keys or rows.
func (s *Store) Footprint(ctx context.Context) (int64, error) {
	if err := strategy.Canceled(ctx); err != nil {
		return 0, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return int64(len(s.stock) + len(s.orders)), nil
}
