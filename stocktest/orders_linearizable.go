package stocktest

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/stockguard/stockguard"
	"github.com/stockguard/stockguard/strategy"
)

// The one-order linearizability case: a few rounds, each one order ID over
// one SKU, hammered by a few goroutines with every call of the contract.
const (
	linOrderRounds     = 4
	linOrderGoroutines = 6
	linOrderOps        = 12 // per goroutine and round
	linOrderStock      = 8
	linOrderQty        = 3 // every Take and Hold of the round's ID takes this
)

// linOrderCall is what a call in the one-order history does.
type linOrderCall int

const (
	lcTake linOrderCall = iota
	lcHold
	lcConfirm
	lcReturn
	lcDecrement // one unit by another buyer
	lcStock
	lcOrder
)

var linOrderCallNames = [...]string{"Take", "Hold", "Confirm", "Return", "Decrement", "Stock", "Order"}

// linOrderOut is what a call was told: its contract error (nil for
// success), and for reads the level or the order's state (0: unknown).
type linOrderOut struct {
	err     error
	unknown bool // ErrOutcomeUnknown: applied or not
	level   int64
	state   stockguard.OrderState
}

// linOrderState is the SKU's level and the round's order.
type linOrderState struct {
	level int64
	state stockguard.OrderState // 0: nothing applied under the ID
	hold  bool                  // applied by Hold
}

// apply is the sequential specification: what call does to s, and what it
// answers.
func (s linOrderState) apply(call linOrderCall) (linOrderState, linOrderOut) {
	switch call {
	case lcTake, lcHold:
		hold := call == lcHold
		switch {
		case s.state == 0 && s.level < linOrderQty:
			return s, linOrderOut{err: stockguard.ErrInsufficientStock}
		case s.state == 0:
			s.level -= linOrderQty
			s.state, s.hold = stockguard.OrderTaken, hold
			if hold {
				s.state = stockguard.OrderHeld
			}
			return s, linOrderOut{}
		case s.hold != hold:
			return s, linOrderOut{err: stockguard.ErrOrderMismatch}
		case !s.state.Open():
			return s, linOrderOut{err: stockguard.ErrOrderClosed}
		}
		return s, linOrderOut{}
	case lcConfirm:
		switch {
		case s.state == 0:
			return s, linOrderOut{err: stockguard.ErrUnknownOrder}
		case !s.state.Open():
			return s, linOrderOut{err: stockguard.ErrOrderClosed}
		}
		s.state = stockguard.OrderTaken
		return s, linOrderOut{}
	case lcReturn:
		switch {
		case s.state == 0:
			return s, linOrderOut{err: stockguard.ErrUnknownOrder}
		case s.state.Open():
			s.state = stockguard.OrderReturned
			s.level += linOrderQty
		}
		return s, linOrderOut{}
	case lcDecrement:
		if s.level < 1 {
			return s, linOrderOut{err: stockguard.ErrInsufficientStock}
		}
		s.level--
		return s, linOrderOut{}
	case lcStock:
		return s, linOrderOut{level: s.level}
	}
	if s.state == 0 {
		return s, linOrderOut{err: stockguard.ErrUnknownOrder}
	}
	return s, linOrderOut{state: s.state}
}

var orderModel = porcupine.NondeterministicModel{
	Init: func() []any { return []any{linOrderState{level: linOrderStock}} },
	Step: func(state, input, output any) []any {
		s, call, out := state.(linOrderState), input.(linOrderCall), output.(linOrderOut)
		next, want := s.apply(call)
		switch {
		case out.err == stockguard.ErrOrderClosed && (call == lcTake || call == lcHold) && s.state != 0 && !s.state.Open():
			// The other call on a closed order: whether it is a mismatch
			// or closed first, the contract leaves open.
			return []any{s}
		case out.unknown && next != s:
			return []any{s, next}
		case out.unknown || want == out:
			return []any{next}
		}
		return nil
	},
	DescribeOperation: func(input, output any) string {
		out := output.(linOrderOut)
		res := fmt.Sprint(out.err)
		switch {
		case out.unknown:
			res = "unknown"
		case out.err != nil:
		case input.(linOrderCall) == lcStock:
			res = fmt.Sprint(out.level)
		case input.(linOrderCall) == lcOrder:
			res = out.state.String()
		}
		return linOrderCallNames[input.(linOrderCall)] + " -> " + res
	},
	DescribeState: func(state any) string { return fmt.Sprintf("%+v", state.(linOrderState)) },
}

// checkOrderLinearizable runs rounds in which goroutines over two
// instances make every call of the contract on one order ID — Take and
// Hold with the same lines, Confirm, Return, Order — while other buyers
// decrement its SKU and Stock reads it, and checks each round's history
// against the sequential specification: a retry that takes again, a
// Return that gives back twice, or a read that misses an applied call
// makes it illegal. Holds here outlive the case; expiry has its own case.
// With Suite.StockNotLinearizable, Stock and Order reads made while other
// calls run are left out.
func checkOrderLinearizable(o *orders) {
	for round := range linOrderRounds {
		o.orderRound(round)
	}
}

func (o *orders) orderRound(round int) {
	skus, ok := o.stock(fmt.Sprintf("lin-order-%d", round), linOrderStock)
	if !ok {
		return
	}
	sku, id := skus[0], o.subj.ID(fmt.Sprintf("lin-order-%d", round))
	lines := []stockguard.Line{line(sku, linOrderQty)}
	instances := []stockguard.Orders{o.a, o.b}
	do := func(inst stockguard.Orders, call linOrderCall) (linOrderOut, error) {
		var out linOrderOut
		var err error
		switch call {
		case lcTake:
			err = inst.Take(o.ctx, id, lines...)
		case lcHold:
			err = inst.Hold(o.ctx, id, longTTL, lines...)
		case lcConfirm:
			err = inst.Confirm(o.ctx, id)
		case lcReturn:
			err = inst.Return(o.ctx, id)
		case lcDecrement:
			err = inst.Decrement(o.ctx, sku, 1)
		case lcStock:
			out.level, err = inst.Stock(o.ctx, sku)
		case lcOrder:
			var info stockguard.OrderInfo
			info, err = inst.Order(o.ctx, id)
			out.state = info.State
		}
		return out, err
	}

	start := time.Now()
	var mu sync.Mutex
	var history []porcupine.Operation
	var wg sync.WaitGroup
	for g := range linOrderGoroutines {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(round), uint64(g)))
			for range linOrderOps {
				call := linOrderCall(rng.IntN(int(lcOrder) + 1))
				if (call == lcStock || call == lcOrder) && o.suite.StockNotLinearizable {
					continue
				}
				if op, ok := o.linOrderOp(g, call, start, func() (linOrderOut, error) { return do(instances[g%2], call) }); ok {
					mu.Lock()
					history = append(history, op)
					mu.Unlock()
				}
			}
		})
	}
	wg.Wait()
	if o.ctx.Err() != nil {
		return
	}
	// The last reads, after every other call returned, pin the outcome.
	for _, call := range []linOrderCall{lcStock, lcOrder} {
		if op, ok := o.linOrderOp(linOrderGoroutines, call, start, func() (linOrderOut, error) { return do(o.b, call) }); ok {
			history = append(history, op)
		}
	}
	res, _ := porcupine.CheckOperationsVerbose(orderModel.ToModel(), history, linCheckTimeout)
	if res == porcupine.Illegal {
		o.r.add("round %d: history of %d calls on order %q and its SKU (stock %d, %d units an order) is not linearizable",
			round, len(history), id, linOrderStock, linOrderQty)
	}
}

// linOrderOp times one call and returns it as an operation, or false if
// the call certainly changed nothing and told nothing (busy, or the
// context ended) or its error is outside what the model allows, which is
// reported.
func (o *orders) linOrderOp(client int, call linOrderCall, start time.Time, do func() (linOrderOut, error)) (porcupine.Operation, bool) {
	begin := int64(time.Since(start))
	out, err := do()
	end := int64(time.Since(start))
	op := porcupine.Operation{ClientId: client, Input: call, Call: begin, Return: end}
	switch c := strategy.Contract(err); {
	case c == stockguard.ErrOutcomeUnknown && (call == lcStock || call == lcOrder):
		return op, false
	case c == stockguard.ErrOutcomeUnknown:
		// It may take effect at any time after the call.
		op.Output, op.Return = linOrderOut{unknown: true}, math.MaxInt64
	case c == stockguard.ErrContention || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded):
		return op, false
	case c == nil && err != nil, c == stockguard.ErrInvalidRequest, c == stockguard.ErrUnavailable, c == stockguard.ErrUnknownSKU:
		o.r.add("%s in a one-order round returned %v", linOrderCallNames[call], err)
		return op, false
	default:
		out.err = c
		if c != nil {
			out.level, out.state = 0, 0
		}
		op.Output = out
	}
	return op, true
}
