package strategy

import (
	"context"
	"fmt"

	"github.com/stockguard/stockguard"
)

// ErrFenced is the answer of a fenced write (see Fencer) made under an
// epoch the back's fence no longer holds: a newer writer took over, and
// nothing was changed. It wraps stockguard.ErrUnavailable: the writer
// cannot serve any more, and must not retry under its epoch.
var ErrFenced = fmt.Errorf("%w: fenced: the back's fence moved past this writer's epoch; nothing changed", stockguard.ErrUnavailable)

// FencedOrders are the order calls a log's consumer makes on the back, as
// a Fencer's Fenced view makes them.
type FencedOrders interface {
	Take(ctx context.Context, id string, lines ...stockguard.Line) error
	Return(ctx context.Context, id string) error
	Order(ctx context.Context, id string) (stockguard.OrderInfo, error)
}

// Fencer is a back whose writes can be fenced in the back itself: it
// keeps, per name, an epoch number that only grows. A transaction of the
// view Fenced(name, epoch) first takes the name's fence under a shared
// lock and, when the fence holds another number, changes nothing and
// answers ErrFenced; AdvanceFence moves the number on, waiting for every
// fenced transaction in flight to commit or roll back. So once
// AdvanceFence has returned, no write of an older epoch lands, however
// late its COMMIT travels: the lease a writer keeps by its own clock
// cannot promise that.
//
// mysqllock's NewAtomic and NewBatched, and pglock's NewAtomic and
// NewBatched, are Fencers (their CreateSchema creates the fence table).
type Fencer interface {
	// Fenced returns the view of the back whose writes apply only while
	// the fence name holds epoch (a name never advanced holds 0).
	Fenced(name string, epoch int64) FencedOrders
	// AdvanceFence adds one to the fence name's number, once every fenced
	// transaction in flight has ended, and returns the new number. Its
	// errors are stockguard.ErrUnavailable, ErrContention,
	// ErrOutcomeUnknown (the number may have moved: advance again) or the
	// context's.
	AdvanceFence(ctx context.Context, name string) (int64, error)
}
