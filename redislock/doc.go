// Package redislock implements stock on Redis: inventories that take N
// units of a SKU, all or nothing, never below zero.
//
//	NewAtomic          one Lua script per request; Orders (exactly-once,
//	                   multi-SKU, holds) — the one to start with
//	NewBatched         concurrent requests combined into one script call:
//	                   decrements per SKU, Orders per slot
//	NewGuarded         lock, read, check, write, unlock: a fenced SKU lock
//	NewRedlockGuarded  the same under a Redlock over independent masters
//	NewSegmented       a SKU's stock split over segments, so contention spreads
//	NewRedisStore      the fenced store NewGuarded writes through
//
// The locks NewGuarded, NewRedlockGuarded and NewSegmented take come from
// package lock (github.com/stockguard/stockguard/redislock/lock), the lock
// library, which they use through its exported API only; to lock something
// that is not stock, use that package. New, NewRedlock, Client, Lock,
// ErrNotObtained and ErrNotHeld remain here as deprecated forwarders to it.
//
// Options: every constructor takes Option values; Option lists the ones
// each reads. An option a constructor does not read, and an invalid option
// value, is never ignored, clamped or a panic: the constructor refuses it
// with an error wrapping stockguard.ErrInvalidRequest (see Option).
// Defaults are the Default* constants.
package redislock

// Files, one concept each:
//
//	options.go    Option, WithPrefix, WithRetry, WithLockTTL, WithStore, the acks
//	atomic.go     Atomic (atomic.lua, level.lua)
//	store.go      Store, RedisStore and its guarded write (guarded_write.lua)
//	guarded.go    Guarded over a lock.Client lock, fenced
//	guarded_redlock.go  NewRedlockGuarded: Guarded over a lock.Redlock, owner-guarded
//	segmented.go  Segmented (segmented_*.lua)
//	segmented_locks.go  WithSegmentLocks
//	raw.go        Segmented.RawStock, for audits
//	batched.go    Batched: requests for a SKU combined into one script (internal/combine)
//	batched_orders.go  Batched's Orders: a slot's order calls in one script
//	              (orders_batch.lua over place and act: orders_placing.lua, orders_acting.lua)
//	orders*.go    Atomic's Orders: one script per one-slot order (orders_local.go,
//	              orders_slot.go), a two-phase protocol across Cluster slots
//	              (orders_remote.go, orders_sku.go), the record (orders_record.go)
//	locks.go      the contract's lock names, forwarded to package lock
