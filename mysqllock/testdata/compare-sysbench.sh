#!/bin/sh
# compare-sysbench.sh: NewAtomic at THREADS workers vs. sysbench running the
# same conditional UPDATE (hotsku.lua) with THREADS threads against the same
# server, ROUNDS rounds, and next to both BenchmarkHotSKU's strategy=driver:
# the same UPDATE sent straight through database/sql, the floor under any
# Go client. Needs sysbench (Debian: apt-get install sysbench) and a server
# you can drop tables in; the normal test run needs neither.
#
#   MYSQL_HOST=127.0.0.1 MYSQL_PORT=3306 MYSQL_USER=root MYSQL_DB=test \
#     ROUNDS=5 SECS=5 THREADS=16 sh mysqllock/testdata/compare-sysbench.sh
#
# All use one round trip per decrement: sysbench a prepared statement, the
# Go sides interpolateParams=true; all THREADS connections. The sides run
# one after the other, so a machine whose load changes between them moves
# the ratios: the order reverses round by round (sysbench first in odd
# rounds), each round prints the three rates, each client's CPU per call
# (user + system, the Go sides' from BenchmarkHotSKU's client_cpu_us_per_op,
# sysbench's from its process times), the load average and three ratios —
# atomic ÷ sysbench (the figure), driver ÷ sysbench (what the Go driver and
# runtime cost against a C client) and atomic ÷ driver (what the package
# adds) — and the last lines are their medians over the rounds. The test
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

# go_side STRATEGY sets go_rate (decrements/s) and go_cpu (µs per call) of
# BenchmarkHotSKU's STRATEGY.
go_side() {
	STOCKGUARD_MYSQL_DSN="$user${MYSQL_PASSWORD:+:$MYSQL_PASSWORD}@tcp($host:$port)/$db" \
		"$tmp/mysqllock.test" -test.run '^$' -test.bench "BenchmarkHotSKU/strategy=$1/workers=$threads\$" \
		-test.benchtime "${secs}s" -test.count 1 >"$tmp/go.out"
	go_rate=$(awk '/^Benchmark/ { for (i = 1; i < NF; i++) if ($(i + 1) == "decrements/s") print $i }' "$tmp/go.out")
	go_cpu=$(awk '/^Benchmark/ { for (i = 1; i < NF; i++) if ($(i + 1) == "client_cpu_us_per_op") print $i }' "$tmp/go.out")
}

atomic_side() {
	go_side atomic
	at_rate=$go_rate at_cpu=$go_cpu
}

driver_side() {
	go_side driver
	dr_rate=$go_rate dr_cpu=$go_cpu
}

: >"$tmp/ratios"
for i in $(seq "$rounds"); do
	load=$(cut -d' ' -f1 /proc/loadavg 2>/dev/null || echo '?')
	if [ $((i % 2)) -eq 1 ]; then
		sysbench_side
		driver_side
		atomic_side
	else
		atomic_side
		driver_side
		sysbench_side
	fi
	ratios=$(awk -v a="$at_rate" -v d="$dr_rate" -v s="$sb_rate" 'BEGIN { printf "%.2f %.2f %.2f", a / s, d / s, a / d }')
	echo "$ratios" >>"$tmp/ratios"
	set -- $ratios
	printf 'round %s (load %s): sysbench %s/s (%s µs CPU/call), atomic %s/s (%s µs), driver %s/s (%s µs): atomic ÷ sysbench %s×, driver ÷ sysbench %s×, atomic ÷ driver %s×\n' \
		"$i" "$load" "$sb_rate" "$sb_cpu" "$at_rate" "$at_cpu" "$dr_rate" "$dr_cpu" "$1" "$2" "$3"
done
for col in '1 atomic ÷ sysbench' '2 driver ÷ sysbench' '3 atomic ÷ driver'; do
	set -- $col
	n=$1
	shift
	cut -d' ' -f"$n" "$tmp/ratios" | sort -n |
		awk -v what="$*" '{ r[NR] = $1 } END { m = NR % 2 ? r[(NR + 1) / 2] : (r[NR / 2] + r[NR / 2 + 1]) / 2; printf "median of %d rounds, %s: %.2f×\n", NR, what, m }'
done
