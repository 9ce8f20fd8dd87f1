package faults

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/stockguard/stockguard/bench"
	"github.com/stockguard/stockguard/bench/replicatargets"
	"github.com/stockguard/stockguard/redislock/lock"
)

// The locks a fault of replicas takes beside the buyers: lockers
// goroutines on each of fenceKeys, each lock held fenceTTL at most.
const (
	lockers  = 2
	fenceTTL = 2 * time.Second
)

var fenceKeys = [2]string{"fence-a", "fence-b"}

// fencing takes locks through the target's lock client while the buyers
// run and records every fencing token an Obtain acknowledged: across a
// failover a token must never be handed out twice (the fence counter's
// increment lost with the master would hand the next holder a token
// already used, and a resource fencing on it would take both writers).
type fencing struct {
	locks *lock.Client
	mu    sync.Mutex
	seen  map[string]map[int64]int // key → token → times acknowledged
	n     int64
}

func newFencing(t bench.Target, conns bench.Servers, ns string) (*fencing, error) {
	rdb, err := bench.Conn[redis.UniversalClient](conns, t.Needs[0])
	if err != nil {
		return nil, err
	}
	locks, err := replicatargets.Locks(t.Name, rdb, ns+":")
	if err != nil {
		return nil, err
	}
	return &fencing{locks: locks, seen: map[string]map[int64]int{}}, nil
}

// run takes and releases locks until stop says so.
func (f *fencing) run(ctx context.Context, timeout time.Duration, stop func() bool) {
	var wg sync.WaitGroup
	for _, key := range fenceKeys {
		for range lockers {
			wg.Go(func() {
				for !stop() && ctx.Err() == nil {
					if err := f.once(ctx, key, timeout); err != nil {
						time.Sleep(5 * time.Millisecond)
					}
				}
			})
		}
	}
	wg.Wait()
}

// once obtains key's lock, records its token and releases it.
func (f *fencing) once(ctx context.Context, key string, timeout time.Duration) error {
	cctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	l, err := f.locks.Obtain(cctx, key, fenceTTL)
	if err != nil {
		return err
	}
	f.mu.Lock()
	if f.seen[key] == nil {
		f.seen[key] = map[int64]int{}
	}
	f.seen[key][l.Token()]++
	f.n++
	f.mu.Unlock()
	return l.Release(cctx)
}

// usable obtains each key's lock, until it is obtained or deadline: after
// a failover no lock may stay wedged past its TTL.
func (f *fencing) usable(ctx context.Context, timeout time.Duration, deadline time.Time) error {
	for _, key := range fenceKeys {
		for {
			err := f.once(ctx, key, timeout)
			if err == nil {
				break
			}
			if time.Now().After(deadline) || ctx.Err() != nil {
				return fmt.Errorf("lock %s not obtained %v after the failover (wedged?): %w", key, usableWithin, err)
			}
			if !errors.Is(err, lock.ErrNotObtained) {
				time.Sleep(10 * time.Millisecond)
			}
		}
	}
	return nil
}

// check counts the tokens handed out more than once.
func (f *fencing) check(rep *Report) {
	rep.Locks = f.n
	for key, tokens := range f.seen {
		for tok, n := range tokens {
			if n > 1 {
				rep.ReusedTokens += int64(n - 1)
				rep.problem("lock %s: fencing token %d handed out %d times", key, tok, n)
			}
		}
	}
}
