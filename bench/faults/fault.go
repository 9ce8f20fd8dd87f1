package faults

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/stockguard/stockguard/bench"
	"github.com/stockguard/stockguard/bench/replicatargets"
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
	// replicas marks a fault that strikes a deployment with replicas and
	// automatic failover (see Applies).
	replicas bool
	// cluster marks a fault of replicas that strikes the Cluster with
	// replicas too, not only the Sentinel topology.
	cluster bool
	// back marks a fault that strikes a target's second server, the store
	// of record behind a front (see Back).
	back bool
}

// Replicas reports whether f strikes a deployment with replicas and
// automatic failover — it applies to the targets on one, and only to them.
func (f Fault) Replicas() bool { return f.replicas }

// Back reports whether f strikes the server behind the stock's, the store
// of record of a target of two tiers (tiered-mysql's MySQL) while the front
// keeps answering — it applies to the targets whose second backend is a
// single server, and only to them.
func (f Fault) Back() bool { return f.back }

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
	// origin, when set, is when the first failover began (since the run's
	// start): recovery is measured from it.
	origin atomic.Int64
	// settled is when the last failover's old master rejoined as a replica
	// (since the run's start): before it, a master that lost its writes
	// (taken, unacknowledged or acknowledged without a replica) may have
	// refused a take the new master can serve — a stale read, not a false
	// sold-out.
	settled atomic.Int64
	// repeat is how many failovers a replicas fault strikes in a row.
	repeat int
	// usable takes a unit of every SKU until the new master acknowledges
	// it, and returns how long after since it did; set by the run.
	usable func(ctx context.Context, since time.Duration) error
	// promotions and usables are, per failover, the time from the strike
	// to the Sentinels' agreement on a new master and to the first unit
	// acknowledged by it.
	promotions, usables []time.Duration
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
	// BackDownFor is how long restart-back keeps the back's server down:
	// seconds of sales the front takes alone, queued for the back.
	BackDownFor = 3 * time.Second
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
			span:   half(PauseFor),
			strike: pause,
		},
		{
			Name: "restart", About: fmt.Sprintf("the server is killed (SIGKILL), stays down up to %v and is started again on its data (MySQL durable, Redis AOF)", DownFor),
			span:   half(DownFor),
			strike: restart,
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
			Name: "failover", About: fmt.Sprintf("the replica lags (the master's replication stream held for %v), the master is killed (SIGKILL), the Sentinels (on Cluster, the other masters) promote the replica; the old master comes back as its replica", LagFor),
			span: half(LagFor), replicas: true, cluster: true,
			strike: func(ctx context.Context, s *scene, span time.Duration) (int, error) {
				return s.failovers(ctx, func(m node) (func() error, error) {
					m.link.Hold()
					sleep(ctx, span)
					if !s.srv.topo.partial() {
						s.down.Store(int64(s.since()))
					}
					err := m.proc.Kill()
					// What the replica had not received dies with the master.
					m.link.Cut()
					return func() error { m.link.Heal(); return nil }, err
				})
			},
		},
		{
			Name: "partition-master", About: "the master is cut from its replica and the Sentinels while clients still reach it, until the Sentinels promote the replica; then it rejoins as its replica, dropping what it took alone",
			span: half(0), replicas: true,
			strike: func(ctx context.Context, s *scene, span time.Duration) (int, error) {
				return s.failovers(ctx, func(m node) (func() error, error) {
					m.link.Cut()
					return func() error { m.link.Heal(); return nil }, nil
				})
			},
		},
		{
			Name: "restart-back", About: fmt.Sprintf("the server behind the front (a tiered target's database) is killed (SIGKILL), stays down up to %v while the front sells, and is started again on its data", BackDownFor),
			span: half(BackDownFor), back: true,
			strike: restart,
		},
		{
			Name: "pause-back", About: fmt.Sprintf("the server behind the front is stopped (SIGSTOP) for up to %v while the front sells, then continued", PauseFor),
			span: half(PauseFor), back: true,
			strike: pause,
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

// pause stops the server for span, then continues it.
func pause(ctx context.Context, s *scene, span time.Duration) (int, error) {
	if err := s.srv.proc.Pause(); err != nil {
		return 0, err
	}
	sleep(ctx, span)
	return 1, s.srv.proc.Resume()
}

// restart kills the server as a crash would, keeps it down for span and
// starts it again on its data.
func restart(ctx context.Context, s *scene, span time.Duration) (int, error) {
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
}

// singleServer reports whether backend n is one server an Env starts and
// strikes: not Redlock's voters, not a deployment with replicas.
func singleServer(n string) bool {
	return slices.Contains(Backends(), n) && !slices.Contains(replicaBackends, n) &&
		!slices.ContainsFunc(redisLikes, func(r redisLike) bool { return r.redlock == n })
}

// LagFor is how long the failover fault holds the master's replication
// stream before it kills the master: every write of that second is on the
// master alone.
const LagFor = time.Second

// promoteWithin bounds a failover: the Sentinels' detection
// (backends.SentinelDownAfter) or the Cluster's
// (backends.ClusterNodeTimeout), election and promotion, on a loaded
// machine.
const promoteWithin = time.Minute

// failovers strikes s.repeat failovers in a row: each time, split
// isolates the master the Sentinels name (on Cluster, the master holding
// the most keys) and returns how to undo it, a replica is promoted, split is undone, the old master rejoins as
// a replica, and the new master must take a unit of every SKU and grant
// every lock.
func (s *scene) failovers(ctx context.Context, split func(m node) (func() error, error)) (int, error) {
	topo := s.srv.topo
	n := 0
	for range max(s.repeat, 1) {
		if ctx.Err() != nil {
			break
		}
		m, err := topo.master(ctx)
		if err != nil {
			return n, err
		}
		heal, err := split(m)
		at := s.since()
		if s.origin.Load() == 0 {
			s.origin.Store(int64(at))
		}
		if err != nil {
			return n, err
		}
		n++
		pctx, cancel := context.WithTimeout(ctx, promoteWithin)
		err = topo.waitPromoted(pctx, m)
		cancel()
		if err != nil {
			heal()
			return n, err
		}
		if s.down.Load() > 0 {
			s.back.Store(int64(s.since())) // a master killed: down until now
		}
		s.promotions = append(s.promotions, s.since()-at)
		if err := heal(); err != nil {
			return n, err
		}
		if err := topo.restore(ctx, m); err != nil {
			return n, err
		}
		s.settled.Store(int64(s.since()))
		// Only now: a writer that waits for a replica's acknowledgement
		// cannot complete a write while the new master has no replica.
		if err := s.usable(ctx, at); err != nil {
			return n, err
		}
	}
	return n, nil
}

// Applies reports whether f can strike t's servers: a fault of replicas
// strikes the targets on a deployment with replicas (Sentinel; Cluster
// only the faults marked for it), the others the targets on a single
// server, and a fault of the back the targets of two single servers
// (tiered-mysql, tiered-pg: their second). partition-master does not
// strike the Cluster: its Links carry replication only, while the cluster
// bus, which detects failures and elects, stays connected, so cutting one
// promotes nobody.
func Applies(f Fault, t bench.Target) bool {
	if len(t.Needs) == 0 {
		return false
	}
	if f.back {
		return len(t.Needs) == 2 && singleServer(t.Needs[0]) && singleServer(t.Needs[1])
	}
	if t.Needs[0] == replicatargets.ClusterName {
		return f.cluster
	}
	return f.replicas == slices.Contains(replicaBackends, t.Needs[0])
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
