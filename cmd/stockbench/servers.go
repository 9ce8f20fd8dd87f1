package main

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"

	"github.com/stockguard/stockguard/bench"
)

// servers are the connections a run uses and the private servers started
// for it.
type servers struct {
	conns bench.Servers
	// args holds, by backend, the flags that reach its servers from a
	// worker process (-procs), when they can be reached.
	args    map[string][]string
	info    []bench.Server // one per server, for the report
	closers []func() error
}

// Close closes the connections and stops the servers this run started,
// backend by backend.
func (s *servers) Close() {
	for i := len(s.closers) - 1; i >= 0; i-- {
		s.closers[i]()
	}
}

// openServers opens every backend the targets need, concurrently, through
// its opener: the servers its flags name, else ones it finds or starts.
// Pools are sized for maxWorkers. In a default run a backend needed only by
// IfReachable targets may fail to open: those targets are dropped, named
// in dropped with the reason, and the run goes on without them.
func openServers(ctx context.Context, c config, maxWorkers int) (_ *servers, dropped map[string]error, _ error) {
	var need []string
	for _, t := range c.targets {
		for _, n := range t.Needs {
			if !slices.Contains(need, n) {
				need = append(need, n)
			}
		}
	}
	pool := poolSize(maxWorkers)
	opened := make([]*bench.Opened, len(need))
	errs := make([]error, len(need))
	var wg sync.WaitGroup
	for i, name := range need {
		o, ok := c.openers[name]
		if !ok {
			errs[i] = fmt.Errorf("a strategy needs backend %q, which is not registered", name)
			continue
		}
		wg.Go(func() { opened[i], errs[i] = o.Open(ctx, bench.OpenConfig{Pool: pool, RTT: c.rtt}) })
	}
	wg.Wait()
	for i, name := range need {
		if errs[i] == nil || c.listed || !onlyIfReachable(c.targets, name) {
			continue
		}
		for _, t := range c.targets {
			if slices.Contains(t.Needs, name) {
				if dropped == nil {
					dropped = map[string]error{}
				}
				dropped[t.Name] = errs[i]
			}
		}
		errs[i] = nil
	}
	s := &servers{conns: bench.Servers{}, args: map[string][]string{}}
	// In the order of need, whichever finished first, so that the report
	// lists the servers the same way every time.
	for i, o := range opened {
		if o == nil {
			continue
		}
		s.conns[need[i]] = o.Conn
		s.args[need[i]] = o.Args
		s.info = append(s.info, o.Servers...)
		s.closers = append(s.closers, o.Close)
	}
	if err := errors.Join(errs...); err != nil {
		s.Close()
		return nil, nil, err
	}
	return s, dropped, nil
}

// onlyIfReachable reports whether every target that needs backend is
// IfReachable.
func onlyIfReachable(targets []bench.Target, backend string) bool {
	for _, t := range targets {
		if slices.Contains(t.Needs, backend) && !t.IfReachable {
			return false
		}
	}
	return true
}

// poolSize is the connection pool of a process running workers workers:
// room for a strategy that holds two connections per request, and some.
func poolSize(workers int) int { return max(2*workers, 64) + 16 }
