// Package pglock implements stockguard.Inventory and stockguard.Orders on
// PostgreSQL, through database/sql with the pgx driver
// (github.com/jackc/pgx/v5/stdlib, driver name "pgx"): the caller keeps its
// pool, and a pool opened for MySQL is refused. Every strategy uses
// PostgreSQL's own answer to a hot row — UPDATE … RETURNING, FOR UPDATE
// [NOWAIT], lock_timeout, SKIP LOCKED, transaction-scoped advisory locks,
// SERIALIZABLE with retry — and reports the same contract errors as the
// other backends, each server error mapped from its SQLSTATE (a deadlock
// or serialization failure is retried, then ErrContention; a lock_timeout
// is ErrContention; a lost connection after the write was sent is
// ErrOutcomeUnknown; anything else the server refuses is ErrUnavailable).
// Orders are on NewAtomic and NewBatched; PurgeOrders deletes old closed
// ones.
package pglock
