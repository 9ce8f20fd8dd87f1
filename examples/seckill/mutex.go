package main

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/redis/go-redis/v9"

	"github.com/stockguard/stockguard"
	"github.com/stockguard/stockguard/strategy"
)

// mutexCounterexample is DELIBERATELY BROKEN: the flash-sale controller
// every tutorial starts with — an in-process sync.Mutex (Java's
// synchronized or ReentrantLock) around GET stock, check, SET stock-qty.
//
// In one process it never oversells. Run two copies behind a load
// balancer and each has its own mutex: a buyer on each reads the same
// level and both write level-qty, so two sales move the stock once. The
// load test shows it: units acknowledged exceed the units gone.
type mutexCounterexample struct {
	rdb    *redis.Client
	prefix string
	mu     sync.Mutex
}

func newMutexCounterexample(rdb *redis.Client, prefix string) *mutexCounterexample {
	return &mutexCounterexample{rdb: rdb, prefix: prefix}
}

// key matches redislock's layout, so the same audit reads it.
func (m *mutexCounterexample) key(sku string) string { return m.prefix + "stock:{" + sku + "}" }

func (m *mutexCounterexample) Decrement(ctx context.Context, sku string, qty int64) error {
	if err := strategy.Canceled(ctx); err != nil {
		return err
	}
	if err := strategy.Validate(sku, qty); err != nil {
		return err
	}
	m.mu.Lock() // guards this process only: that is the bug
	defer m.mu.Unlock()
	have, err := m.Stock(ctx, sku)
	if err != nil {
		return err
	}
	if have < qty {
		return fmt.Errorf("%w: %q has %d, %d wanted", stockguard.ErrInsufficientStock, sku, have, qty)
	}
	if err := m.rdb.Set(ctx, m.key(sku), have-qty, 0).Err(); err != nil {
		return fmt.Errorf("%w: set %q: %w", stockguard.ErrOutcomeUnknown, sku, err)
	}
	return nil
}

func (m *mutexCounterexample) SetStock(ctx context.Context, sku string, qty int64) error {
	if err := strategy.Canceled(ctx); err != nil {
		return err
	}
	if err := strategy.ValidateSet(sku, qty); err != nil {
		return err
	}
	if err := m.rdb.Set(ctx, m.key(sku), qty, 0).Err(); err != nil {
		return fmt.Errorf("%w: set %q: %w", stockguard.ErrOutcomeUnknown, sku, err)
	}
	return nil
}

func (m *mutexCounterexample) Stock(ctx context.Context, sku string) (int64, error) {
	if err := strategy.Canceled(ctx); err != nil {
		return 0, err
	}
	if err := strategy.ValidateSKU(sku); err != nil {
		return 0, err
	}
	n, err := m.rdb.Get(ctx, m.key(sku)).Int64()
	switch {
	case errors.Is(err, redis.Nil):
		return 0, fmt.Errorf("%w: %q", stockguard.ErrUnknownSKU, sku)
	case err != nil:
		return 0, fmt.Errorf("%w: get %q: %w", stockguard.ErrUnavailable, sku, err)
	}
	return n, nil
}
