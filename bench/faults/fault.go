package faults

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"syscall"
	"time"
)

// Fault is one way the servers fail. A run strikes the server holding the
// target's stock with it once, for a bounded time, in the middle of the run.
type Fault struct {
	// Name is how -faults and the tests name it.
	Name string
	// About says in a line what it does.
	About string
	// span is how long the fault lasts in a run of length d.
	span func(d time.Duration) time.Duration
	// strike runs the fault on srv for span (restart: keeps the server
	// down for span, then waits for it to come back) and returns how many
	// times it struck.
	strike func(ctx context.Context, s *scene, span time.Duration) (int, error)
}

// scene is what a fault acts on: the stock's server and the buyers.
type scene struct {
	srv *server
	// tiny, while set, gives every call a deadline of 1µs–1ms.
	tiny atomic.Bool
	// down and back are when a restarted server was killed and when its
	// respawn began (since the run's start), for the check that a server
	// that is down is reported unavailable, never busy.
	down, back atomic.Int64
	since      func() time.Duration
}

// downSince reports whether the server has been down since at or before
// t - downGrace and is still down: killed or shut down, not started again.
func (s *scene) downSince(t time.Duration) bool {
	down := time.Duration(s.down.Load())
	return down > 0 && s.back.Load() == 0 && t >= down+downGrace
}

// every is how often the periodic faults strike.
const every = 200 * time.Millisecond

// Lengths of the one-off faults, at most half the run.
const (
	PauseFor    = 3 * time.Second // longer than DefaultLockTTL of redislock and a 1 s call deadline
	ReadOnlyFor = 2 * time.Second
	DownFor     = time.Second // how long a killed server stays down before it is started again
)

// half returns d/2 capped at limit (0: no cap).
func half(limit time.Duration) func(time.Duration) time.Duration {
	return func(d time.Duration) time.Duration {
		if limit > 0 {
			return min(d/2, limit)
		}
		return d / 2
	}
}

// Faults returns every fault, in the order reports list them.
func Faults() []Fault {
	return []Fault{
		{
			Name: "cut", About: "every 200ms, every connection through the proxy is closed, wherever its request stands",
			span: half(0),
			strike: func(ctx context.Context, s *scene, span time.Duration) (int, error) {
				return periodic(ctx, span, func() error { s.srv.proxy.Cut(); return nil })
			},
		},
		{
			Name: "lose-reply", About: "every 200ms, the next 8 requests reach the server and their replies are dropped with their connections",
			span: half(0),
			strike: func(ctx context.Context, s *scene, span time.Duration) (int, error) {
				return periodic(ctx, span, func() error { s.srv.proxy.DropReplies(8); return nil })
			},
		},
		{
			Name: "kill-conn", About: "every 200ms, the server kills its clients' connections (MySQL KILL, Redis CLIENT KILL TYPE normal)",
			span: half(0),
			strike: func(ctx context.Context, s *scene, span time.Duration) (int, error) {
				return periodic(ctx, span, func() error { _, err := s.srv.killConns(ctx); return err })
			},
		},
		{
			Name: "pause", About: fmt.Sprintf("the server is stopped (SIGSTOP) for up to %v, past lock TTLs and call deadlines, then continued", PauseFor),
			span: half(PauseFor),
			strike: func(ctx context.Context, s *scene, span time.Duration) (int, error) {
				if err := s.srv.proc.Pause(); err != nil {
					return 0, err
				}
				sleep(ctx, span)
				return 1, s.srv.proc.Resume()
			},
		},
		{
			Name: "restart", About: fmt.Sprintf("the server is killed (SIGKILL), stays down up to %v and is started again on its data (MySQL durable, Redis AOF)", DownFor),
			span: half(DownFor),
			strike: func(ctx context.Context, s *scene, span time.Duration) (int, error) {
				s.down.Store(int64(s.since()))
				crash := s.srv.proc.Kill
				if s.srv.crash != nil {
					crash = s.srv.crash
				}
				if err := crash(); err != nil {
					return 0, err
				}
				sleep(ctx, span)
				s.back.Store(int64(s.since()))
				return 1, s.srv.proc.Respawn(context.WithoutCancel(ctx), s.srv.ready)
			},
		},
		{
			Name: "shutdown", About: fmt.Sprintf("the server is shut down cleanly (SIGTERM), stays down up to %v and is started again on its data", DownFor),
			span: half(DownFor),
			strike: func(ctx context.Context, s *scene, span time.Duration) (int, error) {
				s.down.Store(int64(s.since()))
				sig := syscall.SIGTERM
				if s.srv.stop != 0 {
					sig = s.srv.stop
				}
				if err := s.srv.proc.Signal(sig); err != nil {
					return 0, err
				}
				for s.srv.proc.Alive() {
					time.Sleep(10 * time.Millisecond)
				}
				sleep(ctx, span)
				s.back.Store(int64(s.since()))
				return 1, s.srv.proc.Respawn(context.WithoutCancel(ctx), s.srv.ready)
			},
		},
		{
			Name: "read-only", About: fmt.Sprintf("writes are held or refused for up to %v (MySQL FLUSH TABLES WITH READ LOCK, Redis min-replicas-to-write with no replica)", ReadOnlyFor),
			span: half(ReadOnlyFor),
			strike: func(ctx context.Context, s *scene, span time.Duration) (int, error) {
				return 1, s.srv.readOnly(ctx, span)
			},
		},
		{
			Name: "deadline", About: "every call gets a deadline of 1µs–1ms (log-uniform) instead of the usual one",
			span: half(0),
			strike: func(ctx context.Context, s *scene, span time.Duration) (int, error) {
				s.tiny.Store(true)
				sleep(ctx, span)
				s.tiny.Store(false)
				return 1, nil
			},
		},
	}
}

// Names returns the faults' names.
func Names() []string {
	var out []string
	for _, f := range Faults() {
		out = append(out, f.Name)
	}
	return out
}

// Lookup returns the faults named in a comma-separated list, "all" for
// every one.
func Lookup(list string) ([]Fault, error) {
	all := Faults()
	if strings.TrimSpace(list) == "all" {
		return all, nil
	}
	var out []Fault
	for _, name := range strings.Split(list, ",") {
		name = strings.TrimSpace(name)
		if name == "" || slices.ContainsFunc(out, func(f Fault) bool { return f.Name == name }) {
			continue
		}
		i := slices.IndexFunc(all, func(f Fault) bool { return f.Name == name })
		if i < 0 {
			return nil, fmt.Errorf("faults: unknown fault %q; known: all, %s", name, strings.Join(Names(), ", "))
		}
		out = append(out, all[i])
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("faults: %q names no fault", list)
	}
	return out, nil
}

// periodic calls f every 200ms for span, counting its calls; it stops at
// f's first error.
func periodic(ctx context.Context, span time.Duration, f func() error) (int, error) {
	tick := time.NewTicker(every)
	defer tick.Stop()
	end := time.NewTimer(span)
	defer end.Stop()
	n := 0
	for {
		if err := f(); err != nil {
			return n, err
		}
		n++
		select {
		case <-tick.C:
		case <-end.C:
			return n, nil
		case <-ctx.Done():
			return n, nil
		}
	}
}
