// Package mysqllock implements stockguard strategies on MySQL 8.x and MariaDB 10.6+: a conditional UPDATE, SELECT … FOR UPDATE, version CAS, GET_LOCK, segmented rows and batched (group-commit) decrements.
package mysqllock
