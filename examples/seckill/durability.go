package main

import (
	"context"
	"errors"
	"fmt"

	"github.com/redis/go-redis/v9"

	"github.com/stockguard/stockguard"
)

// A Redis strategy acknowledges an order once Redis has it in memory: the
// order outlives a Redis restart only if Redis wrote it to its append-only
// file first, and fsynced it. On Redis's default settings (RDB snapshots,
// appendonly no) a restart comes back from the last snapshot, without the
// orders acknowledged since, and sells their units again. So the service
// refuses such a Redis unless -accept-redis-loss says the operator accepts
// the loss.
//
// The check reads the settings of the server the service writes to. It
// does not judge replicas: with a failover, what a promoted replica lacks
// is lost whatever the master's settings (docs/replicas.md), and
// min-replicas-to-write does not make a write wait for a replica.
const (
	// acceptNoLoss (the default) accepts appendonly yes with appendfsync
	// always: Redis fsyncs every write before it answers.
	acceptNoLoss = ""
	// acceptEverysec also accepts appendfsync everysec: up to about two
	// seconds of acknowledged orders lost when Redis or its host crashes.
	acceptEverysec = "everysec"
	// acceptAny accepts any settings, unchecked (also a Redis whose
	// CONFIG command is disabled).
	acceptAny = "any"
)

// errLossyRedis is the refusal of a Redis that can lose an acknowledged
// order: unavailable, since nothing of the caller's is sent to it.
var errLossyRedis = fmt.Errorf("%w: redis can lose an acknowledged order", stockguard.ErrUnavailable)

// configGetter is what the check needs of a client or a connection.
type configGetter interface {
	ConfigGet(ctx context.Context, parameter string) *redis.MapStringStringCmd
}

// redisDurable reports, with errLossyRedis, a Redis whose persistence
// settings accept does not cover; any error it returns wraps
// stockguard.ErrUnavailable.
func redisDurable(ctx context.Context, c configGetter, accept string) error {
	if accept == acceptAny {
		return nil
	}
	// One pattern rather than two names: CONFIG GET takes one name before
	// Redis 7.
	got, err := c.ConfigGet(ctx, "append*").Result()
	var reply redis.Error
	switch {
	case errors.As(err, &reply):
		return fmt.Errorf("%w: its persistence settings cannot be read (CONFIG GET: %v); check that it runs appendonly yes, appendfsync always, then start with -accept-redis-loss %s",
			errLossyRedis, err, acceptAny)
	case err != nil:
		return fmt.Errorf("%w: reading its persistence settings: %w", stockguard.ErrUnavailable, err)
	}
	aof, fsync := got["appendonly"], got["appendfsync"]
	if aof == "yes" && (fsync == "always" || fsync == "everysec" && accept == acceptEverysec) {
		return nil
	}
	return fmt.Errorf("%w: it runs appendonly %s, appendfsync %s; run it with appendonly yes, appendfsync always, or start with -accept-redis-loss %s (appendfsync everysec) or %s",
		errLossyRedis, aof, fsync, acceptEverysec, acceptAny)
}

// onConnect checks every new connection: a Redis restarted with settings
// that can lose orders (a crash, then a start without the config file) is
// refused before anything is sent to it, since the pool reconnects. go-redis
// returns the error a failed OnConnect wraps (errors.Unwrap), so the
// refusal is wrapped once more.
func onConnect(accept string) func(context.Context, *redis.Conn) error {
	return func(ctx context.Context, cn *redis.Conn) error {
		if err := redisDurable(ctx, cn, accept); err != nil {
			return fmt.Errorf("redis persistence check: %w", err)
		}
		return nil
	}
}
