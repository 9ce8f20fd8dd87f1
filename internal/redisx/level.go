package redisx

import (
	"errors"
	"fmt"
	"strconv"

	"github.com/redis/go-redis/v9"
	"github.com/stockguard/stockguard"
)

// ErrCorrupt means a stock key holds something that is not a stock level:
// not a string (WRONGTYPE), or not the canonical decimal of an integer in
// 0…stockguard.MaxQty. stockguard never writes such a value; someone else
// did. Errors wrapping it also wrap stockguard.ErrUnknownSKU — see Corrupt.
var ErrCorrupt = errors.New("stockguard: stock key holds no valid stock level")

// Corrupt reports that key holds no valid stock level (detail says what it
// holds). The contract needs one of its sentinels, and the choice is
// stockguard.ErrUnknownSKU: the request failed without effect and nothing was
// created, exactly as for a missing key, and for a seller a SKU without a
// readable stock level is one that cannot be sold. ErrContention would
// invite retries that can never succeed, ErrOutcomeUnknown would claim an
// ambiguity there is none of, and ErrInvalidRequest is about the caller's
// input, checked before I/O. errors.Is(err, ErrCorrupt) tells it apart from
// a missing key; SetStock overwrites the bad value.
func Corrupt(key, detail string) error {
	return fmt.Errorf("%w: %w: key %q %s", stockguard.ErrUnknownSKU, ErrCorrupt, key, detail)
}

// ParseLevel parses the value of stock key key as written by SetStock or
// DECRBY: the canonical decimal of 0…MaxQty ("007", "+7", "7.0", " 7" and
// "-1" are all corrupt). Otherwise it returns a Corrupt error.
func ParseLevel(key, s string) (int64, error) {
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || strconv.FormatInt(n, 10) != s || stockguard.ValidateLevel(n) != nil {
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
