#!/bin/sh
# compare-sysbench.sh: NewAtomic at 16 workers vs. sysbench running the same
# conditional UPDATE (hotsku.lua) with 16 threads against the same server,
# alternately, ROUNDS times. Needs sysbench (Debian: apt-get install sysbench)
# and a server you can drop tables in; the normal test run needs neither.
#
#   MYSQL_HOST=127.0.0.1 MYSQL_PORT=3306 MYSQL_USER=root MYSQL_DB=test \
#     ROUNDS=3 SECS=10 THREADS=16 sh mysqllock/testdata/compare-sysbench.sh
#
# Compare sysbench's "transactions: … (N per sec.)" with the benchmark's
# decrements/s. Both use one round trip per decrement: sysbench a prepared
# statement, the Go side interpolateParams=true.
set -eu
host=${MYSQL_HOST:-127.0.0.1} port=${MYSQL_PORT:-3306} user=${MYSQL_USER:-root} db=${MYSQL_DB:-test}
rounds=${ROUNDS:-3} secs=${SECS:-10} threads=${THREADS:-16}
cd "$(dirname "$0")/.."
sb() {
	sysbench testdata/hotsku.lua --db-driver=mysql --mysql-host="$host" --mysql-port="$port" \
		--mysql-user="$user" ${MYSQL_PASSWORD:+--mysql-password="$MYSQL_PASSWORD"} --mysql-db="$db" \
		--threads="$threads" --time="$secs" "$@"
}
sb prepare >/dev/null
trap 'sb cleanup >/dev/null' EXIT
for i in $(seq "$rounds"); do
	printf 'round %s sysbench: ' "$i"
	sb run | grep 'transactions:'
	printf 'round %s go:       ' "$i"
	STOCKGUARD_MYSQL_DSN="$user${MYSQL_PASSWORD:+:$MYSQL_PASSWORD}@tcp($host:$port)/$db" \
		go test -run '^$' -bench "BenchmarkHotSKU/strategy=atomic/workers=$threads\$" -benchtime "${secs}s" -count 1 . |
		grep '^Benchmark'
done
