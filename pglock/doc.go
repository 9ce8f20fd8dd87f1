// Package pglock implements stockguard.Inventory and stockguard.Orders on
// PostgreSQL, through database/sql with the pgx driver
// (github.com/jackc/pgx/v5/stdlib, driver name "pgx"): the caller keeps its
// pool. Every strategy uses PostgreSQL's own answer to a hot row —
// UPDATE … RETURNING, FOR UPDATE [NOWAIT], lock_timeout, SKIP LOCKED,
// transaction-scoped advisory locks, SERIALIZABLE with retry — and reports
// the same contract errors as the other backends, mapped from SQLSTATE in
// one place (see classify).
package pglock
