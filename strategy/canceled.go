package strategy

import (
	"context"
	"errors"
	"fmt"

	"github.com/stockguard/stockguard"
)

// errNilContext is what Canceled reports for a nil context.
var errNilContext = fmt.Errorf("%w: nil context", stockguard.ErrInvalidRequest)

// Canceled returns nil while ctx is live, else ctx.Err() joined with its
// cause when the cause says more. Strategies call it before sending
// anything, so an ended context is reported as the context's own error:
// nothing was applied. A nil ctx is an error wrapping stockguard.ErrInvalidRequest.
func Canceled(ctx context.Context) error {
	if ctx == nil {
		return errNilContext
	}
	err := ctx.Err()
	if err == nil {
		return nil
	}
	if cause := context.Cause(ctx); cause != nil && cause != err {
		return errors.Join(err, cause)
	}
	return err
}
