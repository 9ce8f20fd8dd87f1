package redislock

import (
	"github.com/redis/go-redis/v9"
	"github.com/stockguard/stockguard/redislock/lock"
)

// The lock names stockguard's contract gives this package forward to
// package lock, the lock library, so that code written against them keeps
// compiling; the rest of the lock library is only in package lock.

// Client is lock.Client.
//
// Deprecated: use lock.Client.
type Client = lock.Client

// Lock is lock.Lock.
//
// Deprecated: use lock.Lock.
type Lock = lock.Lock

// ErrNotObtained is lock.ErrNotObtained (the same value).
//
// Deprecated: use lock.ErrNotObtained.
var ErrNotObtained = lock.ErrNotObtained

// ErrNotHeld is lock.ErrNotHeld (the same value).
//
// Deprecated: use lock.ErrNotHeld.
var ErrNotHeld = lock.ErrNotHeld

// New is lock.New with this package's options: it reads WithPrefix,
// WithReplicaAck and WithAOFAck and refuses the others, as lock.New does.
//
// Deprecated: use lock.New.
func New(rdb lock.RedisClient, opts ...Option) (*Client, error) {
	o := newOptions(opts)
	o.only("New", readsClient)
	if o.err != nil {
		return nil, o.err
	}
	return lock.New(rdb, o.lockOptions()...)
}

// NewRedlock is lock.NewRedlock with this package's options: it reads
// WithPrefix, WithNodeTimeout, WithDrift, WithReplicaAck and WithAOFAck and
// refuses the others, as lock.NewRedlock does.
//
// Deprecated: use lock.NewRedlock.
func NewRedlock(clients []redis.UniversalClient, opts ...Option) (*lock.Redlock, error) {
	o := newOptions(opts)
	o.only("NewRedlock", readsRedlock)
	if o.err != nil {
		return nil, o.err
	}
	return lock.NewRedlock(clients, o.lockOptions()...)
}
