// Package redislock implements stock strategies and locks on Redis: an atomic Lua decrement, owner-token locks with fencing tokens, reentrancy, a watchdog and notified waiting, lock-guarded and segmented inventories, and Redlock over independent masters.
package redislock
