module github.com/stockguard/stockguard

go 1.26.0

require (
	github.com/go-sql-driver/mysql v1.10.1
	github.com/jmoiron/sqlx v1.4.0
	github.com/redis/go-redis/v9 v9.23.0
)

require (
	filippo.io/edwards25519 v1.2.0 // indirect
	github.com/cespare/xxhash/v2 v2.3.0 // indirect
	go.uber.org/atomic v1.12.0 // indirect
	golang.org/x/sys v0.48.0 // indirect
)
