#!/usr/bin/env bash
# Regenerates the README's figures from ONE recorded run of the default
# benchmark: docs/results.md (machine, date, command, the table, the ratios
# the docs quote) and docs/stockbench.svg. About three minutes on 2 cores.
#
#   bash scripts/figures.sh [extra stockbench flags]
set -euo pipefail
cd "$(dirname "$0")/.."

dir=$(mktemp -d "${TMPDIR:-/tmp}/stockguard-figures-XXXXXX")
trap 'rm -rf "$dir"' EXIT
go build -o "$dir/stockbench" ./cmd/stockbench

args=""
if (($#)); then args=$(printf ' %q' "$@"); fi
started=$(date -u '+%Y-%m-%d %H:%M UTC')
load=$(cut -d' ' -f1-3 /proc/loadavg)
# Exit 3 (a strategy unsound) must stop the script: figures of an unsound
# run are not published.
"$dir/stockbench" -plot docs/stockbench.svg "$@" >"$dir/table.txt"

cpu=$(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -1)
mem=$(awk '/^MemTotal/ {printf "%.0f GiB", $2 / 1048576}' /proc/meminfo)
# The sections recorded by other commands, from the marker line on, stay as
# they are: this run does not reproduce them.
marker='<!-- recorded separately: scripts/figures.sh keeps what follows -->'
kept=$(awk -v m="$marker" '$0 == m { on = 1 } on' docs/results.md)
# decr/s of a strategy at 64 workers, from the table's rows.
rate() { awk -v s="$1" '$1 == s && $2 == 64 { gsub(",", "", $4); print $4 }' "$dir/table.txt"; }
ratio() {
	local a b
	a=$(rate "$1") b=$(rate "$2")
	if [ -n "$a" ] && [ -n "$b" ]; then awk -v a="$a" -v b="$b" 'BEGIN { printf "%.1f×", a / b }'; else echo "n/a"; fi
}

{
	echo "# Results: one recorded run"
	echo
	echo "Read this page to choose a strategy by rate, latency and CPU per operation (below: per order,"
	echo "and a network hop away), comparing rows of one run, not runs: the machine may be shared."
	echo "Written by \`bash scripts/figures.sh$args\`, which ran \`stockbench -plot docs/stockbench.svg$args\`"
	echo "once, started $started on $(nproc) vCPU ($cpu), $mem, $(uname -sr),"
	echo "$(go env GOVERSION); load average at the start $load. Servers and settings: the \`servers:\` line."
	echo
	echo "![throughput and p99 latency vs workers](stockbench.svg)"
	echo
	echo '```'
	cat "$dir/table.txt"
	echo '```'
	echo
	echo "At 64 workers, one hot SKU, in this run:"
	echo
	echo "- \`mysql-batched\` ÷ \`mysql-atomic\`: $(ratio mysql-batched mysql-atomic)"
	echo "- \`mysql-segmented\` ÷ \`mysql-atomic\`: $(ratio mysql-segmented mysql-atomic)"
	echo "- \`mysql-atomic\` ÷ \`mysql-pessimistic\`: $(ratio mysql-atomic mysql-pessimistic)"
	echo "- \`redis-batched\` ÷ \`redis-atomic\`: $(ratio redis-batched redis-atomic)"
	echo "- \`redis-atomic\` ÷ \`redis-watchtx\`: $(ratio redis-atomic redis-watchtx)"
	echo "- \`redis-guarded\` ÷ \`redis-redlock\`: $(ratio redis-guarded redis-redlock)"
	if [ -n "$kept" ]; then
		echo
		echo "$kept"
	fi
} >docs/results.md
echo "wrote docs/results.md and docs/stockbench.svg" >&2
