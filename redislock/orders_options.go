package redislock

import (
	"fmt"
	"time"
)

// DefaultOrderRetention is how long NewAtomic's Orders remember an order
// ID after its last change (see WithOrderRetention).
const DefaultOrderRetention = 7 * 24 * time.Hour

// MinOrderRetention is the shortest retention WithOrderRetention accepts.
const MinOrderRetention = time.Second

// orderOptions are the settings of Atomic's Orders.
type orderOptions struct {
	retention time.Duration // 0 means DefaultOrderRetention
}

// WithOrderRetention sets how long an order record is kept after its last
// change (taken, confirmed, returned, expired; a hold's record is kept
// this long past its deadline). Within it, every call under the ID is
// answered from the record; past it, the ID is forgotten and a Take, Hold
// or Restock under it applies afresh, so keep it well beyond any retry.
// Default DefaultOrderRetention; at least MinOrderRetention, or every
// method of the Atomic returns an error wrapping
// stockguard.ErrInvalidRequest.
func WithOrderRetention(d time.Duration) Option {
	return func(o *options) {
		if d < MinOrderRetention {
			o.fail(fmt.Errorf("order retention %v below %v", d, MinOrderRetention))
			return
		}
		o.orders.retention = d
	}
}
