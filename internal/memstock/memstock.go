// Package memstock is a correct in-memory stockguard.Inventory: the reference the conformance suite and the harness are checked against.
package memstock

import (
	"context"
	"sync"

	"github.com/stockguard/stockguard"
	"github.com/stockguard/stockguard/internal/errtext"
	"github.com/stockguard/stockguard/strategy"
)

// Store is an in-memory Inventory guarded by one mutex. Several Store values
// can share one map through New's result being passed around; it is the
// single-process ideal every strategy is measured against. Safe for
// concurrent use.
type Store struct {
	mu    sync.Mutex
	stock map[string]int64
}

var _ stockguard.Inventory = (*Store)(nil)

// New returns an empty Store.
func New() *Store { return &Store{stock: make(map[string]int64)} }

// Decrement takes qty units of sku. It returns ErrInvalidRequest,
// ErrUnknownSKU, ErrInsufficientStock or ctx's error.
func (s *Store) Decrement(ctx context.Context, sku string, qty int64) error {
	if err := strategy.Validate(sku, qty); err != nil {
		return err
	}
	if err := strategy.Canceled(ctx); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	have, ok := s.stock[sku]
	switch {
	case !ok:
		return errtext.UnknownSKU(sku)
	case have < qty:
		return errtext.Insufficient(sku, have, qty)
	}
	s.stock[sku] = have - qty
	return nil
}

// SetStock creates or overwrites sku's stock level.
func (s *Store) SetStock(ctx context.Context, sku string, qty int64) error {
	if err := strategy.ValidateSet(sku, qty); err != nil {
		return err
	}
	if err := strategy.Canceled(ctx); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.stock[sku] = qty
	return nil
}

// Stock returns sku's stock level, or ErrUnknownSKU.
func (s *Store) Stock(ctx context.Context, sku string) (int64, error) {
	if err := strategy.ValidateSKU(sku); err != nil {
		return 0, err
	}
	if err := strategy.Canceled(ctx); err != nil {
		return 0, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	have, ok := s.stock[sku]
	if !ok {
		return 0, errtext.UnknownSKU(sku)
	}
	return have, nil
}
