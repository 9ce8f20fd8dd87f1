#!/bin/sh
# compare-sysbench.sh: NewAtomic at THREADS workers vs. sysbench running the
# same conditional UPDATE (hotsku.lua) with THREADS threads against the same
# server, ROUNDS rounds. Needs sysbench (Debian: apt-get install sysbench)
# and a server you can drop tables in; the normal test run needs neither.
#
#   MYSQL_HOST=127.0.0.1 MYSQL_PORT=3306 MYSQL_USER=root MYSQL_DB=test \
#     ROUNDS=5 SECS=5 THREADS=16 sh mysqllock/testdata/compare-sysbench.sh
#
# Both use one round trip per decrement: sysbench a prepared statement, the
# Go side interpolateParams=true; both THREADS connections. The two sides
# run one after the other, so a machine whose load changes between them
# moves the ratio: the order alternates round by round (sysbench first in
# odd rounds), each round prints both rates, their ratio, each client's CPU
# per call (user + system, the Go side's from BenchmarkHotSKU's
# client-cpu-us/op, sysbench's from its process times) and the load
# average, and the last line is the median of the rounds' ratios. The test
# binary is built once, before the first round.
set -eu
host=${MYSQL_HOST:-127.0.0.1} port=${MYSQL_PORT:-3306} user=${MYSQL_USER:-root} db=${MYSQL_DB:-test}
rounds=${ROUNDS:-5} secs=${SECS:-5} threads=${THREADS:-16}
cd "$(dirname "$0")/.."
tmp=$(mktemp -d)
sb() {
	sysbench testdata/hotsku.lua --db-driver=mysql --mysql-host="$host" --mysql-port="$port" \
		--mysql-user="$user" ${MYSQL_PASSWORD:+--mysql-password="$MYSQL_PASSWORD"} --mysql-db="$db" \
		--threads="$threads" --time="$secs" "$@"
}
go test -c -o "$tmp/mysqllock.test" .
sb prepare >/dev/null
trap 'sb cleanup >/dev/null; rm -rf "$tmp"' EXIT

# childcpu sets cpu to the user + system seconds of this shell's finished
# children (times, not in a subshell: a subshell has children of its own).
childcpu() {
	times >"$tmp/times"
	cpu=$(awk 'NR == 2 { split($1, u, "m"); split($2, s, "m"); print u[1] * 60 + u[2] + s[1] * 60 + s[2] }' "$tmp/times")
}

# sysbench_side sets sb_rate (transactions/s) and sb_cpu (µs per call).
sysbench_side() {
	childcpu
	before=$cpu
	sb run >"$tmp/sb.out"
	childcpu
	after=$cpu
	sb_rate=$(awk '/transactions:/ { gsub(/\(/, "", $3); print $3 }' "$tmp/sb.out")
	sb_cpu=$(awk -v b="$before" -v a="$after" '/transactions:/ { printf "%.1f", (a - b) * 1e6 / $2 }' "$tmp/sb.out")
}

# go_side sets go_rate (decrements/s) and go_cpu (µs per call).
go_side() {
	STOCKGUARD_MYSQL_DSN="$user${MYSQL_PASSWORD:+:$MYSQL_PASSWORD}@tcp($host:$port)/$db" \
		"$tmp/mysqllock.test" -test.run '^$' -test.bench "BenchmarkHotSKU/strategy=atomic/workers=$threads\$" \
		-test.benchtime "${secs}s" -test.count 1 >"$tmp/go.out"
	go_rate=$(awk '/^Benchmark/ { for (i = 1; i < NF; i++) if ($(i + 1) == "decrements/s") print $i }' "$tmp/go.out")
	go_cpu=$(awk '/^Benchmark/ { for (i = 1; i < NF; i++) if ($(i + 1) == "client-cpu-us/op") print $i }' "$tmp/go.out")
}

: >"$tmp/ratios"
for i in $(seq "$rounds"); do
	load=$(cut -d' ' -f1 /proc/loadavg 2>/dev/null || echo '?')
	if [ $((i % 2)) -eq 1 ]; then
		sysbench_side
		go_side
	else
		go_side
		sysbench_side
	fi
	ratio=$(awk -v g="$go_rate" -v s="$sb_rate" 'BEGIN { printf "%.2f", g / s }')
	echo "$ratio" >>"$tmp/ratios"
	printf 'round %s (load %s): sysbench %s/s (%s µs CPU/call), go %s/s (%s µs CPU/call): %s×\n' \
		"$i" "$load" "$sb_rate" "$sb_cpu" "$go_rate" "$go_cpu" "$ratio"
done
sort -n "$tmp/ratios" | awk '{ r[NR] = $1 } END { m = NR % 2 ? r[(NR + 1) / 2] : (r[NR / 2] + r[NR / 2 + 1]) / 2; printf "median of %d rounds: %.2f×\n", NR, m }'
