// Package faults strikes private MySQL and Redis servers with the failures
// users meet — connections cut, replies lost, connections killed by the
// server, a server paused past every timeout, killed and restarted, made
// read-only, and callers' deadlines of a microsecond — while concurrent
// buyers run against a strategy of the bench registry, and checks from the
// recorded history that no unit was oversold, lost or duplicated: every
// ErrOutcomeUnknown of an Orders target is reconciled through Order, the
// others are bounded.
//
// It backs the fault suite (go test ./bench/faults) and stockbench
// -faults. It starts
// its own servers (package internal/backends), never uses servers found
// through the environment: they are paused, killed and restarted.
package faults
