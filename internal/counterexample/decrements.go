package counterexample

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/stockguard/stockguard"
	"github.com/stockguard/stockguard/internal/errtext"
)

// The decrement counterexamples below wrap a sound stockguard.Inventory (or
// keep Redis stock levels themselves) and break it the way a real
// implementation could be wrong on one path. Their rare faults are keyed on
// a per-instance call counter, not on chance, so that every run long
// enough to reach the counter shows them.

// AckMulti answers a request for two units or more without writing it: a
// "bulk" fast path that forgot its write. Requests of one unit are sound.
//
// How it breaks: a buyer of several units is told yes, the stock never
// moves. The audit sees units acknowledged that never left: oversold. Only
// a workload that asks for more than one unit at a time takes the path.
type AckMulti struct{ stockguard.Inventory }

// NewAckMulti wraps inner.
func NewAckMulti(inner stockguard.Inventory) *AckMulti { return &AckMulti{inner} }

// Decrement takes qty units of sku, or, for qty ≥ 2, claims to.
func (c *AckMulti) Decrement(ctx context.Context, sku string, qty int64) error {
	if err := admit(ctx, sku, qty); err != nil {
		return err
	}
	if qty >= 2 {
		return nil // the bug
	}
	return c.Inventory.Decrement(ctx, sku, qty)
}

// Every UnknownEvery-th call of a FlakyUnknown answers ErrOutcomeUnknown
// having done nothing; every TwiceEvery-th takes its units twice.
const (
	UnknownEvery = 100
	TwiceEvery   = 1000
)

// FlakyUnknown answers ErrOutcomeUnknown now and then having done nothing,
// and rarely takes a request's units twice: a client whose timeouts fire
// before the request is sent, and whose retry layer resends a request that
// went through.
//
// How it breaks: the units taken twice are stock gone that nobody was
// told they got; an audit that lets each unknown outcome's units go
// unexplained lets the unknowns (which took nothing) hide them. With no
// fault injected an unknown outcome is itself a finding.
type FlakyUnknown struct {
	stockguard.Inventory
	n atomic.Int64
}

// NewFlakyUnknown wraps inner. Its first call answers unknown, then every
// UnknownEvery-th; its second takes twice, then every TwiceEvery-th.
func NewFlakyUnknown(inner stockguard.Inventory) *FlakyUnknown {
	return &FlakyUnknown{Inventory: inner}
}

// Decrement takes qty units of sku — none, once or twice.
func (c *FlakyUnknown) Decrement(ctx context.Context, sku string, qty int64) error {
	if err := admit(ctx, sku, qty); err != nil {
		return err
	}
	n := c.n.Add(1)
	switch {
	case n%UnknownEvery == 1:
		return fmt.Errorf("%w: timed out before sending", stockguard.ErrOutcomeUnknown)
	case n%TwiceEvery == 2:
		if err := c.Inventory.Decrement(ctx, sku, qty); err != nil {
			return err
		}
		c.Inventory.Decrement(ctx, sku, qty) // the resent request
		return nil
	}
	return c.Inventory.Decrement(ctx, sku, qty)
}

// RareBug is the fault of a Rare.
type RareBug int

const (
	// RareAckNoWrite answers nil without writing.
	RareAckNoWrite RareBug = iota + 1
	// RareDoubleWrite takes the units twice and answers nil.
	RareDoubleWrite
	// RareFalseRefusal answers ErrInsufficientStock without looking.
	RareFalseRefusal
	// RareRefuseAfterTake takes the units and answers ErrInsufficientStock.
	RareRefuseAfterTake
)

// Every RareEvery-th call of a Rare goes wrong, from call RareFirst on.
const (
	RareEvery = 10_000
	RareFirst = 100
)

// Rare is sound but for one call in RareEvery: a bug on a path few
// requests take, which a conformance suite of a hundred calls never meets.
//
// How it breaks: by its RareBug — units acknowledged but not taken
// (oversold), taken but not acknowledged (lost), or refused while there
// (a false refusal).
type Rare struct {
	stockguard.Inventory
	bug RareBug
	n   atomic.Int64
}

// NewRare wraps inner with bug.
func NewRare(inner stockguard.Inventory, bug RareBug) *Rare { return &Rare{Inventory: inner, bug: bug} }

// Decrement takes qty units of sku, but on call RareFirst and every
// RareEvery-th after it.
func (c *Rare) Decrement(ctx context.Context, sku string, qty int64) error {
	if err := admit(ctx, sku, qty); err != nil {
		return err
	}
	if c.n.Add(1)%RareEvery != RareFirst {
		return c.Inventory.Decrement(ctx, sku, qty)
	}
	switch c.bug {
	case RareAckNoWrite:
		return nil
	case RareDoubleWrite:
		if err := c.Inventory.Decrement(ctx, sku, qty); err != nil {
			return err
		}
		c.Inventory.Decrement(ctx, sku, qty)
		return nil
	case RareFalseRefusal:
		return errtext.Insufficient(sku, errtext.Unknown, qty)
	case RareRefuseAfterTake:
		if err := c.Inventory.Decrement(ctx, sku, qty); err != nil {
			return err
		}
		return errtext.Insufficient(sku, errtext.Unknown, qty)
	}
	return c.Inventory.Decrement(ctx, sku, qty)
}

// BlindDecr is a plain DECRBY: no check of the stock left.
//
// How it breaks: past zero the stock goes negative and every buyer is
// told yes — oversold. Stock then refuses to read the negative level; the
// audit reads the key itself, and a stock it cannot read fails the audit.
// Only a run that asks for more than the stock takes the path.
type BlindDecr struct{ redisStock }

// NewBlindDecr keeps stock under "<prefix>stock:{sku}".
func NewBlindDecr(rdb redis.UniversalClient, prefix string) *BlindDecr {
	return &BlindDecr{newRedisStock(rdb, prefix)}
}

// Decrement DECRBYs sku's stock.
func (c *BlindDecr) Decrement(ctx context.Context, sku string, qty int64) error {
	if err := admit(ctx, sku, qty); err != nil {
		return err
	}
	return c.rdb.DecrBy(ctx, c.keys.Stock(sku), qty).Err()
}

// CheckDecr GETs the stock, checks it, then DECRBYs: the check and the
// write are two commands.
//
// How it breaks: near zero, buyers that read the same level all pass the
// check and all DECRBY, driving the stock below zero — oversold. It stalls
// a moment between check and write when the level is within a few
// requests of zero (a slow path there: logging, a sell-out notification),
// which makes the race all but certain once several buyers reach the end
// of a SKU's stock together.
type CheckDecr struct{ redisStock }

// nearZero is how many requests' worth of stock CheckDecr calls near zero;
// nearZeroStall how long it stalls there, many round trips: every buyer
// still at the SKU reads the level meanwhile.
const (
	nearZero      = 8
	nearZeroStall = 5 * time.Millisecond
)

// NewCheckDecr keeps stock under "<prefix>stock:{sku}".
func NewCheckDecr(rdb redis.UniversalClient, prefix string) *CheckDecr {
	return &CheckDecr{newRedisStock(rdb, prefix)}
}

// Decrement reads, checks and DECRBYs sku's stock.
func (c *CheckDecr) Decrement(ctx context.Context, sku string, qty int64) error {
	if err := admit(ctx, sku, qty); err != nil {
		return err
	}
	have, err := c.read(ctx, sku)
	if err != nil {
		return err
	}
	if have < qty {
		return insufficient(sku, have, qty)
	}
	if have < nearZero*qty {
		time.Sleep(nearZeroStall)
	}
	return c.rdb.DecrBy(ctx, c.keys.Stock(sku), qty).Err()
}
