// Package pgtargets registers the PostgreSQL backend with package bench —
// how stockbench reaches a PostgreSQL server, its flags -postgres-dsn and
// -postgres-durable — and pglock's strategies as targets pg-<strategy>.
// pg-atomic and pg-batched run in a default stockbench run when a server
// can be had (bench.Target.IfReachable), to keep that run near its two
// minutes; the rest run when -strategies names them (pg-*). Each target's
// store is a fresh table named after the run, dropped afterwards, and the
// audit reads it back with its own SELECT.
//
// Targets find a *sqlx.DB (driver pgx) under the name "postgres" in
// bench.Servers.
package pgtargets
