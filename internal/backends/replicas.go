package backends

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// Replicated is a private Redis master with replicas that follow it
// (redis-server --replicaof), every one a local process a fault test can
// pause (Proc.Pause: SIGSTOP, the replica stops acknowledging), resume
// (Proc.Resume) or kill (Proc.Kill).
type Replicated struct {
	Master   *Redis
	Replicas []*Redis
}

// StartLocalReplicated starts a private master and replicas redis-server
// processes replicating it, and waits until every replica reports
// master_link_status:up and the master counts them all connected. extra
// arguments go to every server's command line.
func StartLocalReplicated(ctx context.Context, replicas int, extra ...string) (*Replicated, error) {
	return startLocalReplicated(ctx, "redis-server", replicas, extra...)
}

// StartLocalValkeyReplicated is StartLocalReplicated with valkey-server.
func StartLocalValkeyReplicated(ctx context.Context, replicas int, extra ...string) (*Replicated, error) {
	return startLocalReplicated(ctx, "valkey-server", replicas, extra...)
}

func startLocalReplicated(ctx context.Context, server string, replicas int, extra ...string) (*Replicated, error) {
	if replicas < 1 {
		return nil, fmt.Errorf("backends: a replicated master needs at least one replica, not %d", replicas)
	}
	// The master sends a replica its first full sync at once instead of
	// waiting 5s (the default) for more replicas to share the transfer.
	m, err := startLocalRedisLike(ctx, server, append([]string{"--repl-diskless-sync-delay", "0"}, extra...)...)
	if err != nil {
		return nil, err
	}
	r := &Replicated{Master: m}
	host, port, _ := strings.Cut(m.Addr, ":")
	for range replicas {
		s, err := startLocalRedisLike(ctx, server, append([]string{"--replicaof", host, port}, extra...)...)
		if err != nil {
			r.Close()
			return nil, err
		}
		r.Replicas = append(r.Replicas, s)
	}
	if err := r.WaitSynced(ctx); err != nil {
		r.Close()
		return nil, err
	}
	return r, nil
}

// Client returns a new client on the master; the caller closes it.
func (r *Replicated) Client() *redis.Client { return r.Master.Client() }

// Close stops the replicas and the master and removes their dirs.
func (r *Replicated) Close() error {
	var errs []error
	for _, s := range r.Replicas {
		errs = append(errs, s.Close())
	}
	if r.Master != nil {
		errs = append(errs, r.Master.Close())
	}
	return errors.Join(errs...)
}

// WaitSynced waits (up to 30s) until every replica's link to the master is
// up, the master reports them all as online and a WAIT sees every one
// acknowledge — after a start, or after a paused replica is resumed and
// has caught up.
func (r *Replicated) WaitSynced(ctx context.Context) error {
	return waitSynced(ctx, r.Master, r.Replicas, true)
}

// waitSynced waits until each of replicas reports master_link_status:up
// and master lists each as state=online; with ack, also until a WAIT sees
// every replica confirm a write (not on a cluster node, which takes a key
// of its own slots only).
func waitSynced(ctx context.Context, master *Redis, replicas []*Redis, ack bool) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	mc := master.Client()
	defer mc.Close()
	clients := make([]*redis.Client, len(replicas))
	for i, s := range replicas {
		clients[i] = s.Client()
		defer clients[i].Close()
	}
	for {
		last := synced(ctx, mc, clients, ack)
		if last == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("backends: replicas of %s not in sync: %w (last: %v)", master.Addr, ctx.Err(), last)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// synced returns nil when every replica is linked and online, else why not.
func synced(ctx context.Context, master *redis.Client, replicas []*redis.Client, ack bool) error {
	for _, c := range replicas {
		info, err := c.Info(ctx, "replication").Result()
		if err != nil {
			return err
		}
		if !strings.Contains(info, "master_link_status:up") {
			return fmt.Errorf("replica %s: link not up", c.Options().Addr)
		}
	}
	info, err := master.Info(ctx, "replication").Result()
	if err != nil {
		return err
	}
	if online := strings.Count(info, "state=online"); online < len(replicas) {
		return fmt.Errorf("master %s: %d of %d replicas online", master.Options().Addr, online, len(replicas))
	}
	if !ack {
		return nil
	}
	// Online is not yet acknowledging: a replica that has just loaded its
	// first sync answers a WAIT only some moments later. The write gives
	// the WAIT something to confirm (it confirms its connection's writes).
	if err := master.Set(ctx, "stockguard:backends:synced", 1, time.Second).Err(); err != nil {
		return err
	}
	if n, err := master.Wait(ctx, len(replicas), time.Second).Result(); err != nil || n < int64(len(replicas)) {
		return fmt.Errorf("master %s: %d of %d replicas acknowledge (%v)", master.Options().Addr, n, len(replicas), err)
	}
	return nil
}
