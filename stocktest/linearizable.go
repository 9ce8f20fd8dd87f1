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
)

// The linearizability case is small on purpose: porcupine's search grows
// quickly with the number of overlapping operations, and a few hundred
// operations on a small stock already cover selling out under contention.
const (
	linGoroutines = 8
	linOps        = 24 // operations per goroutine
	linStock      = 60
	// linCheckTimeout bounds porcupine's search. A search that runs out of
	// time proves nothing either way, so it is not reported.
	linCheckTimeout = 10 * time.Second
)

// linInput is one call on the stock counter: a Decrement of qty, or a
// Stock read when qty is 0.
type linInput struct{ qty int64 }

// linOutcome is what a call was told, as far as the model cares.
type linOutcome int

const (
	linApplied      linOutcome = iota // Decrement returned nil
	linInsufficient                   // Decrement returned ErrInsufficientStock
	linUnknown                        // Decrement may or may not have applied
	linRead                           // Stock returned linOutput.level
)

type linOutput struct {
	outcome linOutcome
	level   int64
}

// stockModel is the sequential specification of one SKU's stock counter.
// Calls that certainly changed nothing (ErrContention, ErrUnavailable, a
// context error) are
// left out of the history, since a step that keeps the state may be placed
// anywhere; a failed Stock read is left out for the same reason.
var stockModel = porcupine.NondeterministicModel{
	Init: func() []any { return []any{int64(linStock)} },
	Step: func(state, input, output any) []any {
		level, in, out := state.(int64), input.(linInput), output.(linOutput)
		switch out.outcome {
		case linRead:
			if level == out.level {
				return []any{level}
			}
		case linApplied:
			if level >= in.qty {
				return []any{level - in.qty}
			}
		case linInsufficient:
			if level < in.qty {
				return []any{level}
			}
		case linUnknown:
			if level >= in.qty {
				return []any{level, level - in.qty}
			}
			return []any{level}
		}
		return nil
	},
	Hash: func(state any) uint64 { return uint64(state.(int64)) },
	DescribeOperation: func(input, output any) string {
		in, out := input.(linInput), output.(linOutput)
		if in.qty == 0 {
			return fmt.Sprintf("Stock() = %d", out.level)
		}
		return fmt.Sprintf("Decrement(%d) -> %v", in.qty, [...]string{"ok", "insufficient", "unknown"}[out.outcome])
	},
	DescribeState: func(state any) string { return fmt.Sprint(state) },
}

// linearizable stocks one SKU with linStock units, lets linGoroutines
// goroutines over two instances run a bounded random mix of Decrement(1–3)
// and Stock, ends with one more Stock read, and checks the whole history
// against stockModel: every Stock read must return a level the counter had
// at some instant within the call, every refusal must meet a level below
// its quantity, every acknowledged take must meet enough stock. This
// catches stale or torn Stock reads that the conservation cases, which read
// only once everything is over, cannot see. With s.StockNotLinearizable only
// the last read is checked.
func (s Suite) linearizable(ctx context.Context, subj Subject, r *recorder) {
	ctx, cancel := context.WithTimeout(ctx, s.Timeout)
	defer cancel()

	instances := []stockguard.Inventory{subj.New(), subj.New()}
	sku := subj.SKU("linearizable")
	if !r.set(ctx, instances[0], sku, linStock) {
		return
	}

	start := time.Now()
	histories := make([][]porcupine.Operation, linGoroutines+1)
	strays := make([][]string, linGoroutines+1)
	var wg sync.WaitGroup
	for g := range linGoroutines {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(g), 0x11ea))
			for range linOps {
				qty := int64(0)
				if rng.IntN(5) < 3 {
					qty = int64(1 + rng.IntN(3))
				}
				op, stray := linCall(ctx, instances[g%2], sku, qty, g, start)
				if op != nil && (qty > 0 || !s.StockNotLinearizable) {
					histories[g] = append(histories[g], *op)
				}
				if stray != "" {
					strays[g] = append(strays[g], stray)
				}
			}
		})
	}
	wg.Wait()
	if ctx.Err() != nil {
		r.add("did not finish %d operations within %v", linGoroutines*linOps, s.Timeout)
		return
	}
	// A last read after every call returned pins the final level.
	op, stray := linCall(ctx, instances[1], sku, 0, linGoroutines, start)
	if op != nil {
		histories[linGoroutines] = append(histories[linGoroutines], *op)
	}
	if stray != "" {
		strays[linGoroutines] = append(strays[linGoroutines], stray)
	}

	var history []porcupine.Operation
	var takes, reads int
	for g := range histories {
		for _, s := range strays[g] {
			r.add("%s", s)
		}
		for _, op := range histories[g] {
			if op.Input.(linInput).qty == 0 {
				reads++
			} else {
				takes++
			}
		}
		history = append(history, histories[g]...)
	}
	res, info := porcupine.CheckOperationsVerbose(stockModel.ToModel(), history, linCheckTimeout)
	if res == porcupine.Illegal {
		longest := 0
		for _, partition := range info.PartialLinearizations() {
			for _, lin := range partition {
				longest = max(longest, len(lin))
			}
		}
		r.add("history of %d Decrements and %d Stock reads from a stock of %d is not linearizable: at most %d operations fit one sequential order", takes, reads, linStock, longest)
	}
}

// linCall makes one timed call: a Decrement of qty, or a Stock read when
// qty is 0. It returns the operation to check, nil if the call certainly
// changed nothing, and a description of any error the contract rules out.
func linCall(ctx context.Context, inv stockguard.Inventory, sku string, qty int64, client int, start time.Time) (*porcupine.Operation, string) {
	call := int64(time.Since(start))
	var (
		level int64
		err   error
	)
	if qty == 0 {
		level, err = inv.Stock(ctx, sku)
	} else {
		err = inv.Decrement(ctx, sku, qty)
	}
	ret := int64(time.Since(start))
	op := &porcupine.Operation{ClientId: client, Input: linInput{qty}, Call: call, Return: ret}

	unknown := errors.Is(err, stockguard.ErrOutcomeUnknown)
	unchanged := !unknown && (errors.Is(err, stockguard.ErrContention) || errors.Is(err, stockguard.ErrUnavailable) ||
		errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded))
	var stray string
	switch {
	case qty == 0 && err == nil:
		op.Output = linOutput{outcome: linRead, level: level}
	case qty == 0 && (unchanged || unknown):
		return nil, ""
	case qty == 0:
		return nil, fmt.Sprintf("Stock(%q) returned an unexpected error: %v", sku, err)
	case err == nil:
		op.Output = linOutput{outcome: linApplied}
	case errors.Is(err, stockguard.ErrInsufficientStock):
		op.Output = linOutput{outcome: linInsufficient}
	case unchanged:
		return nil, ""
	default:
		if !unknown {
			// The error is itself the violation; as for its effect on the
			// counter, assume nothing.
			stray = fmt.Sprintf("Decrement(%q, %d) returned an unexpected error: %v", sku, qty, err)
		}
		// An outcome nobody knows may take effect at any time after the
		// call, even after every other call returned.
		op.Output = linOutput{outcome: linUnknown}
		op.Return = math.MaxInt64
	}
	return op, stray
}
