package lock

import (
	"errors"
	"fmt"
	"time"

	"github.com/stockguard/stockguard"
	"github.com/stockguard/stockguard/internal/optset"
	"github.com/stockguard/stockguard/internal/rediskeys"
	"github.com/stockguard/stockguard/internal/redisx"
)

// Option configures New or NewRedlock. Both read WithPrefix, WithReplicaAck
// and WithAOFAck; NewRedlock also reads WithNodeTimeout and WithDrift.
//
// An option the constructor does not read, and an invalid option value
// (each option says which values it accepts), is never ignored, clamped
// or a panic: the constructor refuses it with an error wrapping
// stockguard.ErrInvalidRequest that names it, before any I/O.
type Option func(*options)

// optionSet is a set of this package's options, one bit each: those given
// to a constructor, and those it reads.
type optionSet = optset.Set

const (
	optPrefix optionSet = 1 << iota
	optReplicaAck
	optAOFAck
	optNodeTimeout
	optDrift
)

// optionNames are the options' names, in optionSet's bit order.
var optionNames = [...]string{"WithPrefix", "WithReplicaAck", "WithAOFAck", "WithNodeTimeout", "WithDrift"}

// What each constructor reads (Option's table).
const (
	readsClient  = optPrefix | optReplicaAck | optAOFAck
	readsRedlock = readsClient | optNodeTimeout | optDrift
)

type options struct {
	keys rediskeys.Keys
	ack  redisx.Ack // WithReplicaAck, WithAOFAck: what confirms a write; zero for nothing

	nodeTimeout time.Duration // NewRedlock: per-master timeout; 0 means derived from the ttl
	drift       drift         // NewRedlock: clock drift allowance

	given optionSet // the options given
	err   error     // the first invalid option
}

func newOptions(opts []Option) options {
	o := options{drift: drift{factor: DefaultDriftFactor, fixed: DefaultDriftFixed}}
	for _, opt := range opts {
		opt(&o)
	}
	return o
}

// only refuses the options given that constructor ctor does not read: an
// option silently ignored would leave the caller believing it in force.
func (o *options) only(ctor string, reads optionSet) {
	if err := optset.Unread(ctor, o.given, reads, optionNames[:]); err != nil {
		o.fail(err)
	}
}

// fail records the first invalid option.
func (o *options) fail(err error) {
	if o.err == nil {
		o.err = invalid(err)
	}
}

// invalid wraps err, an invalid option or constructor argument, in
// stockguard.ErrInvalidRequest.
func invalid(err error) error {
	if errors.Is(err, stockguard.ErrInvalidRequest) {
		return fmt.Errorf("redislock: %w", err)
	}
	return fmt.Errorf("%w: redislock: %w", stockguard.ErrInvalidRequest, err)
}

// WithPrefix puts prefix in front of every key: "<prefix>lock:{key}",
// "<prefix>fence:{key}". A prefix with "{" or "}" is an invalid option: it
// would override the keys' hash tags (rediskeys.ValidatePrefix). Default "".
func WithPrefix(prefix string) Option {
	return func(o *options) {
		o.given |= optPrefix
		if err := rediskeys.ValidatePrefix(prefix); err != nil {
			o.fail(err)
			return
		}
		o.keys.Prefix = prefix
	}
}

// DefaultReplicaAck is the number of replicas a lock write waits for
// without WithReplicaAck or WithAOFAck: none — a lock counts as taken once
// the master has it, and a failover that promotes a replica which never
// received it loses it (two holders).
const DefaultReplicaAck = 0

// WithReplicaAck makes every write of a lock — obtain with its fencing
// counter, refresh, release — count only once n replicas have it: each is
// followed on its own connection, in the same pipeline, by WAIT n timeout.
// Fewer than n replicas within timeout makes the method return an error
// wrapping stockguard.ErrOutcomeUnknown (detail: "acknowledged by k of n
// replicas within timeout"); an Obtain whose WAIT falls short releases the
// lock again (owner-checked) and returns no handle: see Client.Obtain.
//
// n must be 1…100 and timeout whole milliseconds in 1ms…1min; anything
// else is an invalid option. Not with WithAOFAck. On a *redis.Ring every
// write fails with stockguard.ErrUnavailable (a Ring cannot route a
// keyless WAIT). Default DefaultReplicaAck (off).
func WithReplicaAck(n int, timeout time.Duration) Option {
	return func(o *options) {
		o.given |= optReplicaAck
		o.setAck(redisx.Ack{Replicas: n, Timeout: timeout})
	}
}

// WithAOFAck is WithReplicaAck with WAITAOF local replicas timeout
// instead of WAIT: a write counts once local (0 or 1) masters and replicas
// (0…100, not both 0) have fsynced it to their append-only files. It needs
// Redis ≥ 7.2 or Valkey ≥ 8 (and appendonly yes on the master for local
// 1): a server without WAITAOF makes every write fail with
// stockguard.ErrUnavailable, nothing sent. Otherwise the errors are
// WithReplicaAck's. Default off.
func WithAOFAck(local, replicas int, timeout time.Duration) Option {
	return func(o *options) {
		o.given |= optAOFAck
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
