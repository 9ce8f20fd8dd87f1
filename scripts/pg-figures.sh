#!/bin/sh
# The figures of docs/postgres.md, on one private PostgreSQL server, durable
# (fsync=on, synchronous_commit=on), started here and removed afterwards:
#   1. one stockbench run: PostgreSQL and MySQL strategies side by side, both
#      durable, one hot SKU, 16 and 64 workers;
#   2. pgbench running pg-atomic's UPDATE as a custom script, 16 clients,
#      against the same server, right after;
#   3. go test -bench BenchmarkOrders: single-line Take vs Decrement, 64
#      workers, on the same server.
# Usage: scripts/pg-figures.sh [seconds per run, default 8]
set -eu
secs=${1:-8}
cd "$(dirname "$0")/.."

bin=
if command -v initdb >/dev/null 2>&1; then bin=$(dirname "$(readlink -f "$(command -v initdb)")"); fi
if [ -z "$bin" ]; then bin=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1); fi
[ -x "$bin/initdb" ] || { echo "no initdb on PATH nor in /usr/lib/postgresql/*/bin" >&2; exit 1; }

dir=$(mktemp -d /tmp/stockguard-pgfig-XXXXXX)
as=
if [ "$(id -u)" = 0 ]; then # initdb and postgres refuse root
	chown postgres: "$dir"
	as="setpriv --reuid=postgres --regid=postgres --clear-groups"
fi
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
stop() { $as "$bin/pg_ctl" -D "$dir/data" -m fast stop >/dev/null 2>&1 || true; rm -rf "$dir"; }
trap stop EXIT INT TERM
$as "$bin/initdb" -D "$dir/data" -U postgres -A trust -E UTF8 --locale=C >/dev/null
$as "$bin/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w -o "-p $port -k $dir -c listen_addresses=127.0.0.1 \
	-c max_connections=600 -c shared_buffers=128MB -c fsync=on -c synchronous_commit=on -c full_page_writes=on" start >/dev/null
dsn="postgres://postgres@127.0.0.1:$port/postgres?sslmode=disable"

echo "== stockbench: PostgreSQL and MySQL, both durable, 1 hot SKU"
go run ./cmd/stockbench -postgres-dsn "$dsn" -postgres-durable -durable \
	-strategies pg-atomic,pg-batched,pg-segmented,pg-pessimistic,mysql-atomic,mysql-batched,mysql-segmented,mysql-pessimistic \
	-workers 16,64 -skus 1 -duration "${secs}s" -warmup 1s -plot ""

echo "== pgbench: pg-atomic's UPDATE as a custom script, 16 clients, same server"
"$bin/psql" -q "$dsn" <<'SQL'
CREATE TABLE pgbench_stock (sku text COLLATE "C" PRIMARY KEY, qty bigint NOT NULL CHECK (qty BETWEEN 0 AND 9007199254740991),
	version bigint NOT NULL DEFAULT 0, fence bigint NOT NULL DEFAULT 0);
INSERT INTO pgbench_stock (sku, qty) VALUES ('hot', 9007199254740991);
SQL
printf '%s\n' "UPDATE pgbench_stock SET qty = qty - 1, version = version + 1 WHERE sku = 'hot' AND qty >= 1 RETURNING qty;" > "$dir/take.sql"
"$bin/pgbench" -n -M prepared -c 16 -j 2 -T "$secs" -f "$dir/take.sql" "$dsn" | grep -E "tps|latency average"

echo "== go test -bench BenchmarkOrders: single-line Take vs Decrement, 64 workers, same server"
STOCKGUARD_POSTGRES_DSN="$dsn" go test -run '^$' -bench BenchmarkOrders -benchtime "${secs}s" ./pglock/ | grep -E '^Benchmark'
