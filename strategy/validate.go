package strategy

import (
	"fmt"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/stockguard/stockguard"
)

// ValidateSKU reports whether sku is 1–stockguard.MaxSKULen bytes of valid UTF-8 with no
// control characters. It returns nil or an error wrapping stockguard.ErrInvalidRequest.
func ValidateSKU(sku string) error { return validText("sku", sku, stockguard.MaxSKULen) }

// validText checks that s, the request's what, is 1–limit bytes of valid
// UTF-8 with no control characters: what fits the store's binary key and
// prints safely in an error.
func validText(what, s string, limit int) error {
	switch {
	case s == "":
		return fmt.Errorf("%w: empty %s", stockguard.ErrInvalidRequest, what)
	case len(s) > limit:
		return fmt.Errorf("%w: %s is %d bytes, at most %d allowed", stockguard.ErrInvalidRequest, what, len(s), limit)
	case !utf8.ValidString(s):
		return fmt.Errorf("%w: %s %q is not valid UTF-8", stockguard.ErrInvalidRequest, what, s)
	}
	for _, r := range s {
		if unicode.IsControl(r) {
			return fmt.Errorf("%w: %s %q contains control character %U", stockguard.ErrInvalidRequest, what, s, r)
		}
	}
	return nil
}

// ValidateQty reports whether qty is a quantity that can be taken: 1…stockguard.MaxQty.
// It returns nil or an error wrapping stockguard.ErrInvalidRequest.
func ValidateQty(qty int64) error {
	if qty < 1 || qty > stockguard.MaxQty {
		return fmt.Errorf("%w: qty %d outside 1…%d", stockguard.ErrInvalidRequest, qty, int64(stockguard.MaxQty))
	}
	return nil
}

// ValidateLevel reports whether qty is a stock level that can be set:
// 0…stockguard.MaxQty. It returns nil or an error wrapping stockguard.ErrInvalidRequest.
func ValidateLevel(qty int64) error {
	if qty < 0 || qty > stockguard.MaxQty {
		return fmt.Errorf("%w: stock level %d outside 0…%d", stockguard.ErrInvalidRequest, qty, int64(stockguard.MaxQty))
	}
	return nil
}

// ValidateSet checks a SetStock request: ValidateSKU, then ValidateLevel.
// Strategies call it before any I/O.
func ValidateSet(sku string, qty int64) error {
	if err := ValidateSKU(sku); err != nil {
		return err
	}
	return ValidateLevel(qty)
}

// Validate checks a Decrement request: ValidateSKU, then ValidateQty.
// Strategies call it before any I/O.
func Validate(sku string, qty int64) error {
	if err := ValidateSKU(sku); err != nil {
		return err
	}
	return ValidateQty(qty)
}

// ValidateID reports whether id is an order ID: 1–stockguard.MaxIDLen bytes of valid
// UTF-8 with no control characters. It returns nil or an error wrapping
// stockguard.ErrInvalidRequest.
func ValidateID(id string) error { return validText("order id", id, stockguard.MaxIDLen) }

// ValidateLines reports whether lines make an order: 1–stockguard.MaxLines lines with
// distinct SKUs, each passing Validate. It returns nil or an error wrapping
// stockguard.ErrInvalidRequest.
func ValidateLines(lines []stockguard.Line) error {
	if len(lines) == 0 || len(lines) > stockguard.MaxLines {
		return fmt.Errorf("%w: %d lines, 1…%d allowed", stockguard.ErrInvalidRequest, len(lines), stockguard.MaxLines)
	}
	seen := make(map[string]struct{}, len(lines))
	for i, l := range lines {
		if err := Validate(l.SKU, l.Qty); err != nil {
			// The contract error's text first, then where: "stockguard:
			// invalid request: line 1: empty sku".
			detail := strings.TrimPrefix(err.Error(), stockguard.ErrInvalidRequest.Error()+": ")
			return fmt.Errorf("%w: line %d: %s", stockguard.ErrInvalidRequest, i, detail)
		}
		if _, dup := seen[l.SKU]; dup {
			return fmt.Errorf("%w: sku %q appears on more than one line", stockguard.ErrInvalidRequest, l.SKU)
		}
		seen[l.SKU] = struct{}{}
	}
	return nil
}

// ValidateTTL reports whether ttl is a hold's lifetime: stockguard.MinHoldTTL…stockguard.MaxHoldTTL.
// It returns nil or an error wrapping stockguard.ErrInvalidRequest.
func ValidateTTL(ttl time.Duration) error {
	if ttl < stockguard.MinHoldTTL || ttl > stockguard.MaxHoldTTL {
		return fmt.Errorf("%w: hold ttl %v outside %v…%v", stockguard.ErrInvalidRequest, ttl, stockguard.MinHoldTTL, stockguard.MaxHoldTTL)
	}
	return nil
}

// ValidateTake checks a Take request: ValidateID, then ValidateLines.
// Strategies call it before any I/O.
func ValidateTake(id string, lines []stockguard.Line) error {
	if err := ValidateID(id); err != nil {
		return err
	}
	return ValidateLines(lines)
}

// ValidateHold checks a Hold request: ValidateTake, then ValidateTTL.
func ValidateHold(id string, ttl time.Duration, lines []stockguard.Line) error {
	if err := ValidateTake(id, lines); err != nil {
		return err
	}
	return ValidateTTL(ttl)
}

// ValidateRestock checks a Restock request: ValidateID, then Validate.
func ValidateRestock(id, sku string, qty int64) error {
	if err := ValidateID(id); err != nil {
		return err
	}
	return Validate(sku, qty)
}
