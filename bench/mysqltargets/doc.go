// Package mysqltargets registers the MySQL backend with package bench —
// how stockbench reaches a MySQL or MariaDB server, its flag -mysql-dsn —
// and the targets that keep their stock in it: mysqllock's strategies and
// the MySQL counterexamples. Each target's store is a fresh table named
// after the run, dropped afterwards, and the audit reads it back with its
// own SELECT.
//
// Targets find a *sqlx.DB under the name "mysql" in bench.Servers.
package mysqltargets
