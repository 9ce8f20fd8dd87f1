// Package redislock implements stock strategies and locks on Redis: an atomic Lua decrement, owner-token locks with fencing tokens, reentrancy, a watchdog and notified waiting, and lock-guarded inventories.
package redislock
