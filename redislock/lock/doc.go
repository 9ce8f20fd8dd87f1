// Package lock is a lock library on Redis: owner-token locks with fencing
// tokens (New, Client.Obtain, Lock), reentrant locks (Owner, Reentrant), a
// watchdog that keeps a lease alive (Watchdog, MaxHold), waiting woken by
// the holder's release (Notify), and Redlock over independent masters
// (NewRedlock, QuorumLock). It knows nothing of stock: package redislock's
// lock-guarded inventories are built on it, through the exported API below
// and nothing else.
//
// A lock on key lives in "<prefix>lock:{key}" and its fencing counter in
// "<prefix>fence:{key}"; a script on the same master (and, in a cluster,
// hash tag) can check a holder through LockKey and FenceKey, and a resource
// can refuse a holder whose lease ran out by its fencing token (Lock.Token).
//
// Options: New and NewRedlock take Option values and Obtain takes
// ObtainOption values; an option a constructor does not read, and an
// invalid option value, is refused with an error wrapping
// stockguard.ErrInvalidRequest before any I/O, never ignored or clamped.
// Defaults are the Default* constants.
package lock

// Files, one concept each:
//
//	options.go    Option, WithPrefix, WithReplicaAck, WithAOFAck
//	client.go     Client, Obtain and its ObtainOptions, the lock errors
//	lock.go       Lock: Release, Refresh, TTL, Context, Lost, Valid
//	reentrant.go  Owner and Reentrant
//	wait.go       RetryStrategy (ObtainRetry) and the notifier behind Notify
//	watchdog.go   the renewer behind Watchdog and MaxHold
//	pipeline.go   one round trip for the scripts a Client's goroutines run at once
//	redlock.go    Redlock and QuorumLock, WithNodeTimeout, WithDrift
//	lock_*.lua, reentrant_*.lua
