package redisx

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/redis/go-redis/v9"
	"github.com/stockguard/stockguard"
	"github.com/stockguard/stockguard/internal/errtext"
	"github.com/stockguard/stockguard/internal/rediskeys"
	"github.com/stockguard/stockguard/strategy"
)

// Corrupt reports that key holds no valid stock level (detail says what it
// holds). The contract needs one of its sentinels, and the choice is
// stockguard.ErrUnknownSKU: the request failed without effect and nothing was
// created, exactly as for a missing key, and for a seller a SKU without a
// readable stock level is one that cannot be sold. ErrContention would
// invite retries that can never succeed, ErrOutcomeUnknown would claim an
// ambiguity there is none of, and ErrInvalidRequest is about the caller's
// input, checked before I/O. errors.Is(err, stockguard.ErrCorruptStock) tells it apart from
// a missing key; SetStock overwrites the bad value.
func Corrupt(key, detail string) error {
	return fmt.Errorf("%w: %w: key %q %s", stockguard.ErrUnknownSKU, stockguard.ErrCorruptStock, key, detail)
}

// ParseLevel parses the value of stock key key as written by SetStock or
// DECRBY: the canonical decimal of 0…MaxQty ("007", "+7", "7.0", " 7" and
// "-1" are all corrupt). Otherwise it returns a Corrupt error.
func ParseLevel(key, s string) (int64, error) {
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || strconv.FormatInt(n, 10) != s || strategy.ValidateLevel(n) != nil {
		const show = 32
		if len(s) > show {
			s = s[:show] + "…"
		}
		return 0, Corrupt(key, fmt.Sprintf("holds %q, not a stock level 0…%d", s, int64(stockguard.MaxQty)))
	}
	return n, nil
}

// IsWrongType reports whether err is Redis's WRONGTYPE reply: the key exists
// but does not hold a string.
func IsWrongType(err error) bool { return redis.HasErrorPrefix(err, "WRONGTYPE") }

// Processor is the part of a go-redis client that SetLevel and GetLevel
// need; every redis.UniversalClient and *redis.Tx has it.
type Processor interface {
	Process(ctx context.Context, cmd redis.Cmder) error
}

// SetLevel sets stock key key to qty (already validated) with SET, sent at
// most once: resent after a decrement was applied in between, an overwrite
// would undo that decrement. Errors come from Classify (Write).
func SetLevel(ctx context.Context, c Processor, key string, qty int64) error {
	return Classify(ctx, c.Process(ctx, Once(redis.NewStatusCmd(ctx, "set", key, qty))), Write)
}

// GetLevel reads key, the stock key of sku, with GET. A missing key is
// stockguard.ErrUnknownSKU, a value that is no stock level is Corrupt, other
// errors come from Classify (Read).
func GetLevel(ctx context.Context, c Processor, key, sku string) (int64, error) {
	cmd := redis.NewStringCmd(ctx, "get", key)
	err := c.Process(ctx, cmd)
	switch {
	case errors.Is(err, redis.Nil):
		return 0, errtext.UnknownSKU(sku)
	case IsWrongType(err):
		return 0, Corrupt(key, "is not a string")
	case err != nil:
		return 0, Classify(ctx, err, Read)
	}
	return ParseLevel(key, cmd.Val())
}

// Levels is SetStock and Stock for the strategies that keep a SKU's stock
// in one key ("<prefix>stock:{sku}"): input validated before any I/O, the
// context checked before anything is sent, errors wrapped with Pkg, the
// name of the strategy's package ("redislock: set stock of …"). A Levels is
// safe for concurrent use if Client is.
type Levels struct {
	Client Processor
	Writer Processor // what Set sends through (Acked); nil means Client
	Keys   rediskeys.Keys
	Pkg    string
}

// Set creates sku with qty units (0…stockguard.MaxQty), or overwrites its
// stock level, whatever the key held. It returns nil or an error wrapping
// stockguard.ErrInvalidRequest (before any I/O), the context's error, or
// one of SetLevel.
func (l Levels) Set(ctx context.Context, sku string, qty int64) error {
	if err := strategy.ValidateSet(sku, qty); err != nil {
		return err
	}
	if err := strategy.Canceled(ctx); err != nil {
		return err
	}
	w := l.Writer
	if w == nil {
		w = l.Client
	}
	if err := SetLevel(ctx, w, l.Keys.Stock(sku), qty); err != nil {
		return errtext.Wrap(err, "%s: set stock of %q", l.Pkg, sku)
	}
	return nil
}

// Get returns the units of sku left. It returns an error wrapping
// stockguard.ErrInvalidRequest (before any I/O), the context's error, or
// one of GetLevel.
func (l Levels) Get(ctx context.Context, sku string) (int64, error) {
	if err := strategy.ValidateSKU(sku); err != nil {
		return 0, err
	}
	if err := strategy.Canceled(ctx); err != nil {
		return 0, err
	}
	n, err := GetLevel(ctx, l.Client, l.Keys.Stock(sku), sku)
	if err != nil {
		return 0, errtext.Wrap(err, "%s: stock of %q", l.Pkg, sku)
	}
	return n, nil
}
