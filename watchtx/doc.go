// Package watchtx decrements stock in Redis optimistically: WATCH the stock key, read it, and write it in MULTI/EXEC, retrying when another client got there first.
package watchtx
