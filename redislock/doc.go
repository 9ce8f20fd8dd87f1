// Package redislock implements stock strategies and locks on Redis: an atomic Lua decrement, owner-token locks with fencing tokens, reentrancy, a watchdog and notified waiting, lock-guarded and segmented inventories, and Redlock over independent masters.
//
// # Locks, and the inventories built on them
//
// The package is two layers. The lock library — Client (New) and its Lock,
// Redlock (NewRedlock) and its QuorumLock — knows nothing of stock. The
// inventories — Atomic, Guarded (NewGuarded, NewRedlockGuarded), Segmented
// and the Store they write through — use only the lock library's exported
// API, the same any user has: Obtain with NoFence (a lock that leaves
// nothing behind) or IfExists (a lock only on a resource that exists,
// ErrNotExist otherwise); Lock.Token, OwnerToken and Valid; Client.LockKey
// and FenceKey, so that a script on the resource can check the lock; and
// QuorumLock.OwnerToken and GrantedBy. A test holds the inventories to
// that.
//
// Options: every constructor takes Option values; Option lists the ones
// each reads. An option a constructor does not read, and an invalid option
// value, is never ignored, clamped or a panic: the constructor refuses it
// with an error wrapping stockguard.ErrInvalidRequest (see Option).
// Defaults are the Default* constants.
package redislock

// Files, one concept each:
//
//	the lock library
//	  client.go     Client, Obtain and its ObtainOptions, the lock errors
//	  lock.go       Lock: Release, Refresh, TTL, Context, Lost, Valid
//	  reentrant.go  Owner and Reentrant
//	  wait.go       RetryStrategy (ObtainRetry) and the notifier behind Notify
//	  watchdog.go   the renewer behind Watchdog and MaxHold
//	  pipeline.go   one round trip for the scripts a Client's goroutines run at once
//	  redlock.go    Redlock and QuorumLock
//	  lock_*.lua, reentrant_*.lua
//	both
//	  options.go    Option, WithPrefix, WithRetry, WithLockTTL, WithStore
//	the inventories
//	  atomic.go     Atomic (atomic.lua, level.lua)
//	  store.go      Store, RedisStore and its guarded write (guarded_write.lua)
//	  guarded.go    Guarded over a Client lock, fenced
//	  guarded_redlock.go  NewRedlockGuarded: Guarded over a Redlock, owner-guarded
//	  segmented.go  Segmented (segmented_*.lua)
//	  segmented_locks.go  WithSegmentLocks
//	  raw.go        Segmented.RawStock, for audits
//	  batched.go    Batched: requests for a SKU combined into one script (internal/combine)
//	  batched_orders.go  Batched's Orders: a slot's order calls in one script
//	                (orders_batch.lua over place and act: orders_placing.lua, orders_acting.lua)
//	  orders*.go    Atomic's Orders: one script per one-slot order (orders_local.go,
//	                orders_slot.go), a two-phase protocol across Cluster slots
//	                (orders_remote.go, orders_sku.go), the record (orders_record.go)
