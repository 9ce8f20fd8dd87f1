package peers

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// Scenario is one lock-cycle measurement: goroutines that each, in a
// loop, obtain a lock and release it at once.
type Scenario struct {
	Name       string
	Goroutines int
	// Shared makes every goroutine lock one key, waiting for it (Obtain
	// with wait); otherwise each cycle locks a fresh key of its own, trying
	// once, so that no two cycles contend.
	Shared bool
}

// Measurement is one peer's figures in one run of a scenario.
type Measurement struct {
	Peer     string
	Scenario string
	// Cycles counts obtains that succeeded, each followed by its release;
	// GaveUp those that gave up before the time was up (those still
	// waiting then are not counted); ReleaseFailed the releases that
	// returned an error (a Redlock whose masters did not all answer in
	// time: the lock then expires), counted among the cycles.
	Cycles, GaveUp, ReleaseFailed int64
	Elapsed                       time.Duration
	// Commands is how many commands the servers ran meanwhile, those run
	// by scripts included (INFO commandstats).
	Commands int64
	// P99 is the 99th percentile of the time a successful Obtain took.
	P99 time.Duration
}

// Rate returns successful cycles per second.
func (m Measurement) Rate() float64 { return float64(m.Cycles) / m.Elapsed.Seconds() }

// PerAcquisition returns Redis commands per successful acquisition.
func (m Measurement) PerAcquisition() float64 {
	if m.Cycles == 0 {
		return 0
	}
	return float64(m.Commands) / float64(m.Cycles)
}

// warmup is how long a scenario runs before it is measured: connections
// are dialled, scripts loaded, subscriptions made.
const warmup = 300 * time.Millisecond

// Measure runs s against p for d after a short warm-up, counting the
// commands of servers (those p uses), with keys under run. An obtain that
// fails otherwise than with a busy lock (ErrBusy) stops the measurement,
// and its error is returned.
func Measure(ctx context.Context, p Peer, s Scenario, d time.Duration, servers []redis.UniversalClient, run string) (Measurement, error) {
	if _, err := cycles(ctx, p, s, warmup, run+"w"); err != nil {
		return Measurement{}, err
	}
	before, err := Commands(ctx, servers)
	if err != nil {
		return Measurement{}, err
	}
	m, err := cycles(ctx, p, s, d, run)
	if err != nil {
		return Measurement{}, err
	}
	after, err := Commands(ctx, servers)
	if err != nil {
		return Measurement{}, err
	}
	m.Commands = after - before
	return m, nil
}

// cycles runs the goroutines of s for d.
func cycles(ctx context.Context, p Peer, s Scenario, d time.Duration, run string) (Measurement, error) {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	// Cancelled at the end, without a deadline: rueidislock bounds the life
	// of a lock by its context's deadline.
	dctx, stop := context.WithCancel(ctx)
	defer stop()
	timer := time.AfterFunc(d, stop)
	defer timer.Stop()
	var (
		wg               sync.WaitGroup
		ok, gave, failed atomic.Int64
		mu               sync.Mutex
		took             []time.Duration
	)
	began := time.Now()
	for g := range s.Goroutines {
		wg.Go(func() {
			var mine []time.Duration
			prefix := run + ":g" + strconv.Itoa(g) + ":"
			for i := 0; dctx.Err() == nil; i++ {
				key := run + ":hot"
				if !s.Shared {
					key = prefix + strconv.Itoa(i)
				}
				t0 := time.Now()
				release, err := p.Obtain(dctx, key, s.Shared)
				if err != nil && dctx.Err() != nil {
					continue // cut short by the end of the time: not counted
				}
				if errors.Is(err, ErrBusy) {
					gave.Add(1)
					continue
				}
				if err != nil {
					cancel(fmt.Errorf("peers: %s: obtain %q: %w", p.Name, key, err))
					return
				}
				mine = append(mine, time.Since(t0))
				// The release runs to its end even once the time is up.
				if err := release(context.WithoutCancel(ctx)); err != nil {
					failed.Add(1)
				}
				ok.Add(1)
			}
			mu.Lock()
			took = append(took, mine...)
			mu.Unlock()
		})
	}
	wg.Wait()
	elapsed := time.Since(began)
	if err := context.Cause(ctx); err != nil {
		return Measurement{}, err
	}
	m := Measurement{Peer: p.Name, Scenario: s.Name, Cycles: ok.Load(), GaveUp: gave.Load(), ReleaseFailed: failed.Load(), Elapsed: elapsed}
	if len(took) > 0 {
		slices.Sort(took)
		m.P99 = took[len(took)*99/100]
	}
	return m, nil
}
