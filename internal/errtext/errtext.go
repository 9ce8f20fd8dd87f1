// Package errtext words a strategy's errors the one way the contract asks:
// the text of the contract error first, the same on every backend, then
// where it happened and the backend's detail —
// "stockguard: unknown sku: watchtx: decrement "x": key … does not exist".
package errtext

import (
	"errors"
	"fmt"
	"strings"

	"github.com/stockguard/stockguard"
	"github.com/stockguard/stockguard/strategy"
)

// Wrap returns err with where (format and args) put after its contract
// error's text; errors.Is and errors.As see through it to err. An error
// outside the contract, or one whose text does not start with its
// contract error's, gets where in front, as fmt.Errorf("%s: %w") would.
func Wrap(err error, format string, args ...any) error {
	if err == nil {
		return nil
	}
	where := fmt.Sprintf(format, args...)
	c := strategy.Contract(err)
	if c == nil {
		return fmt.Errorf("%s: %w", where, err)
	}
	head := c.Error()
	if errors.Is(err, stockguard.ErrFenced) {
		head = stockguard.ErrFenced.Error()
	}
	rest, ok := strings.CutPrefix(err.Error(), head)
	if !ok {
		return fmt.Errorf("%s: %w", where, err)
	}
	return &wrapped{text: head + ": " + where + rest, err: err}
}

type wrapped struct {
	text string
	err  error
}

func (w *wrapped) Error() string { return w.text }
func (w *wrapped) Unwrap() error { return w.err }
