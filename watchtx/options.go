package watchtx

import (
	"fmt"
	"time"

	"github.com/stockguard/stockguard"
	"github.com/stockguard/stockguard/internal/rediskeys"
	"github.com/stockguard/stockguard/internal/redisx"
	"github.com/stockguard/stockguard/strategy"
)

// Defaults of New's retry policy (DefaultRetry). The policy is
// contention-aware (Adaptive): a request that lost a race backs off for
// longer the more requests of the same Inventory are backing off, times the
// recent length of an attempt, so that on a hot key the retries spread out
// instead of colliding again in the next round. DefaultMaxDelay must leave
// room for that spread (about writers × attempt time): with a 20ms cap, 64
// writers on one key fell to 0.1–0.5× the 1-writer throughput; with 100ms
// they keep 0.7–1.3× on 2 cores (BenchmarkInventoryScaling). Attempts are
// generous because a loser applied nothing; a request gives up
// (ErrContention) only under sustained overload.
const (
	DefaultMaxAttempts = 50
	DefaultBaseDelay   = time.Millisecond
	DefaultMaxDelay    = 100 * time.Millisecond
)

// DefaultRetry returns the retry policy of New without WithRetry:
// DefaultMaxAttempts, DefaultBaseDelay, DefaultMaxDelay, Adaptive.
func DefaultRetry() stockguard.RetryPolicy {
	return stockguard.RetryPolicy{
		MaxAttempts: DefaultMaxAttempts,
		BaseDelay:   DefaultBaseDelay,
		MaxDelay:    DefaultMaxDelay,
		Adaptive:    true,
	}
}

// Option configures New. New refuses an invalid option value with an error
// wrapping stockguard.ErrInvalidRequest, before any I/O — the rule of the
// other strategy packages: never a clamp or a panic.
type Option func(*options)

type options struct {
	keys  rediskeys.Keys
	retry strategy.RetryPolicy
	ack   redisx.Ack // WithReplicaAck, WithAOFAck; zero for none
	err   error      // the first invalid option
}

// fail records the first invalid option.
func (o *options) fail(err error) {
	if o.err == nil {
		o.err = fmt.Errorf("%w: watchtx: %w", stockguard.ErrInvalidRequest, err)
	}
}

// WithPrefix puts prefix in front of every key: "<prefix>stock:{sku}", the
// same keys as redislock.NewAtomic with the same prefix. A prefix with "{"
// or "}" is an invalid option: it would override the SKUs' hash tags
// (rediskeys.ValidatePrefix). Default "".
func WithPrefix(prefix string) Option {
	return func(o *options) {
		if err := rediskeys.ValidatePrefix(prefix); err != nil {
			if o.err == nil {
				o.err = fmt.Errorf("%w: watchtx: %w", stockguard.ErrInvalidRequest, err)
			}
			return
		}
		o.keys.Prefix = prefix
	}
}

// WithRetry sets the policy for retrying after a conflict (EXEC aborted
// because the key changed after WATCH). Zero fields take stockguard's
// defaults, not DefaultRetry's; a policy RetryPolicy.Validate refuses is
// an invalid option. Default DefaultRetry().
func WithRetry(p stockguard.RetryPolicy) Option {
	return func(o *options) {
		if err := p.Validate(); err != nil {
			if o.err == nil {
				o.err = fmt.Errorf("watchtx: %w", err)
			}
			return
		}
		o.retry = p
	}
}

// DefaultReplicaAck is the number of replicas a write waits for without
// WithReplicaAck or WithAOFAck: none — a decrement counts once the master
// applied it, and a failover to a replica that never received it loses it.
const DefaultReplicaAck = 0

// WithReplicaAck makes a Decrement (and SetStock) count only once n
// replicas have it: its MULTI / DECRBY / EXEC is followed, on the WATCHed
// connection and in the same pipeline, by WAIT n timeout. Fewer than n
// replicas within timeout → an error wrapping stockguard.ErrOutcomeUnknown
// ("acknowledged by k of n replicas within timeout"): applied on the
// master, it may or may not survive a failover. n must be 1…100 and
// timeout whole milliseconds in 1ms…1min, else an invalid option; not
// with WithAOFAck. On a *redis.ClusterClient the WAIT goes to the node
// that ran the EXEC (the WATCHed connection's). An acknowledged write
// survives a failover that promotes one of the replicas that acknowledged
// it. Default DefaultReplicaAck (off).
func WithReplicaAck(n int, timeout time.Duration) Option {
	return func(o *options) { o.setAck(redisx.Ack{Replicas: n, Timeout: timeout}) }
}

// WithAOFAck is WithReplicaAck with WAITAOF local replicas timeout: a
// write counts once local (0 or 1) masters and replicas (0…100, not both
// 0) have fsynced it. It needs Redis ≥ 7.2 or Valkey ≥ 8 (appendonly yes
// for local 1): otherwise every Decrement and SetStock fails with
// stockguard.ErrUnavailable, nothing sent. Default off.
func WithAOFAck(local, replicas int, timeout time.Duration) Option {
	return func(o *options) {
		o.setAck(redisx.Ack{AOF: true, Local: local, Replicas: replicas, Timeout: timeout})
	}
}

// setAck records a, or fails as redisx.Ack.Then says.
func (o *options) setAck(a redisx.Ack) {
	ack, err := o.ack.Then(a)
	if err != nil {
		o.fail(err)
		return
	}
	o.ack = ack
}
