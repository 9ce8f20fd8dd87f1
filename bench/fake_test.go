package bench

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"

	"github.com/stockguard/stockguard"
	"github.com/stockguard/stockguard/internal/memstock"
)

// memTarget is the correct in-memory reference: every instance shares one
// memstock.Store.
func memTarget() Target {
	return Target{
		Name: "mem", About: "memstock reference",
		Open: func(context.Context, Servers, string) (*Store, error) {
			s := memstock.New()
			return &Store{New: func() (stockguard.Inventory, error) { return s, nil }}, nil
		},
	}
}

// fault is a way for fakeInv to be wrong.
type fault int

const (
	faultNone              fault = iota
	faultRacy                    // read, yield, write the computed level: lost updates (the first two calls overlap)
	faultLie                     // every 7th success is reported as ErrContention
	faultUnknown                 // every 7th success is reported as ErrOutcomeUnknown (honest)
	faultStockLies               // Stock reports one unit more than there is
	faultFalseRefusal            // every 7th request is refused as insufficient, stock untouched
	faultNoCheck                 // decrements below zero
	faultOther                   // every 7th request fails with a non-contract error, nothing applied
	faultSlowRetries             // counts one retry per request
	faultLocalMutex              // faultRacy under a mutex of the instance's own: sound only as one instance
	faultLocalMutexAcross        // faultLocalMutex whose first calls on two instances overlap
	faultNoCheckUnreadable       // faultNoCheck, and Stock refuses to read a level below zero
)

// fakeStore is an in-memory store whose levels are atomics, so that Raw
// can read them independently of the Inventory's methods.
type fakeStore struct {
	mu     sync.Mutex
	levels map[string]*atomic.Int64

	// meet makes the first two racy calls overlap between their read and
	// their write, so that a counterexample fails whatever the scheduler
	// does (on a loaded machine two calls may otherwise never overlap).
	meetMu  sync.Mutex
	arrived int
	met     chan struct{}
}

// meet blocks the first caller until a second arrives; later callers pass.
func (s *fakeStore) meet() {
	s.meetMu.Lock()
	if s.met == nil {
		s.met = make(chan struct{})
	}
	s.arrived++
	met := s.met
	if s.arrived == 2 {
		close(met)
	}
	s.meetMu.Unlock()
	<-met
}

func (s *fakeStore) level(sku string) *atomic.Int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.levels[sku]
}

type fakeInv struct {
	s       *fakeStore
	f       fault
	mu      sync.Mutex // faultLocalMutex's lock
	n       atomic.Int64
	retries atomic.Int64
}

func (i *fakeInv) Retries() int64 { return i.retries.Load() }

func (i *fakeInv) SetStock(ctx context.Context, sku string, qty int64) error {
	i.s.mu.Lock()
	defer i.s.mu.Unlock()
	v := new(atomic.Int64)
	v.Store(qty)
	i.s.levels[sku] = v
	return nil
}

func (i *fakeInv) Stock(ctx context.Context, sku string) (int64, error) {
	l := i.s.level(sku)
	if l == nil {
		return 0, stockguard.ErrUnknownSKU
	}
	if i.f == faultStockLies {
		return l.Load() + 1, nil
	}
	if v := l.Load(); i.f == faultNoCheckUnreadable && v < 0 {
		return 0, fmt.Errorf("stock of %q is %d: not a level", sku, v)
	}
	return l.Load(), nil
}

var errWeird = errors.New("something odd")

func (i *fakeInv) Decrement(ctx context.Context, sku string, qty int64) error {
	l := i.s.level(sku)
	if l == nil {
		return stockguard.ErrUnknownSKU
	}
	seventh := i.n.Add(1)%7 == 0
	switch {
	case i.f == faultFalseRefusal && seventh:
		return stockguard.ErrInsufficientStock
	case i.f == faultOther && seventh:
		return errWeird
	case i.f == faultSlowRetries:
		i.retries.Add(1)
	case i.f == faultLocalMutex, i.f == faultLocalMutexAcross:
		i.mu.Lock()
		defer i.mu.Unlock()
		have := l.Load()
		if have < qty {
			return stockguard.ErrInsufficientStock
		}
		if i.f == faultLocalMutexAcross {
			// Held under this instance's mutex: only another instance's
			// call can arrive second.
			i.s.meet()
		}
		runtime.Gosched()
		l.Store(have - qty)
		return nil
	case i.f == faultNoCheck || i.f == faultNoCheckUnreadable:
		l.Add(-qty)
		return nil
	case i.f == faultRacy:
		have := l.Load()
		if have < qty {
			return stockguard.ErrInsufficientStock
		}
		i.s.meet()
		l.Store(have - qty)
		return nil
	}
	for {
		have := l.Load()
		if have < qty {
			return fmt.Errorf("%w: %d < %d", stockguard.ErrInsufficientStock, have, qty)
		}
		if l.CompareAndSwap(have, have-qty) {
			break
		}
	}
	switch {
	case i.f == faultLie && seventh:
		return stockguard.ErrContention
	case i.f == faultUnknown && seventh:
		return stockguard.ErrOutcomeUnknown
	}
	return nil
}

// fakeTarget is a target of fakeInv instances with fault f; their store has
// an independent reader.
func fakeTarget(name string, f fault) Target {
	return Target{
		Name: name,
		Open: func(context.Context, Servers, string) (*Store, error) {
			return fakeStoreOf(&fakeStore{levels: map[string]*atomic.Int64{}}, f), nil
		},
	}
}

// sharedFakeTarget is fakeTarget with an Attach: its stores stay in a map
// by namespace, as a backend keeps them, for the shares of a split run to
// reach.
func sharedFakeTarget(name string, f fault) Target {
	var stores sync.Map // ns → *fakeStore
	return Target{
		Name: name,
		Open: func(_ context.Context, _ Servers, ns string) (*Store, error) {
			s := &fakeStore{levels: map[string]*atomic.Int64{}}
			stores.Store(ns, s)
			st := fakeStoreOf(s, f)
			st.Close = func(context.Context) error { stores.Delete(ns); return nil }
			return st, nil
		},
		Attach: func(_ context.Context, _ Servers, ns string) (*Store, error) {
			s, ok := stores.Load(ns)
			if !ok {
				return nil, fmt.Errorf("no store %q", ns)
			}
			return fakeStoreOf(s.(*fakeStore), f), nil
		},
	}
}

func fakeStoreOf(s *fakeStore, f fault) *Store {
	return &Store{
		New: func() (stockguard.Inventory, error) { return &fakeInv{s: s, f: f}, nil },
		Raw: func(_ context.Context, sku string) (int64, error) {
			l := s.level(sku)
			if l == nil {
				return 0, stockguard.ErrUnknownSKU
			}
			return l.Load(), nil
		},
	}
}

// noop does nothing at all, to measure the harness itself. Its audit fails
// by construction: nothing it acknowledges ever leaves the stock.
type noop struct{}

func (noop) Decrement(context.Context, string, int64) error { return nil }
func (noop) SetStock(context.Context, string, int64) error  { return nil }
func (noop) Stock(context.Context, string) (int64, error)   { return DefaultSteadyStock, nil }
func noopTarget() Target {
	return Target{Name: "noop", Open: func(context.Context, Servers, string) (*Store, error) {
		return &Store{New: func() (stockguard.Inventory, error) { return noop{}, nil }}, nil
	}}
}
