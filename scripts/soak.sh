#!/usr/bin/env bash
# The soak: every matrix CI keeps only a representative row of. Run it
# before calling a change to a strategy resolved, and quote its last lines.
#
#   bash scripts/soak.sh            # everything, about 75 minutes on 2 cores
#   bash scripts/soak.sh faults     # one part: pglock tidb replicas faults failover adversary netns
#
# Each part runs the same tests as `go test -race ./...`, with the
# environment variable that widens them from the default rows to the full
# matrix. Private servers only: whatever the machine runs is left alone.
set -euo pipefail
cd "$(dirname "$0")/.."

export STOCKGUARD_REQUIRE_BACKENDS=1
unset STOCKGUARD_MYSQL_DSN STOCKGUARD_REDIS_ADDR STOCKGUARD_TIDB_DSN STOCKGUARD_VALKEY_ADDR STOCKGUARD_POSTGRES_DSN STOCKGUARD_BACKEND \
  STOCKGUARD_REDIS_SENTINEL STOCKGUARD_REDIS_SENTINEL_MASTER STOCKGUARD_REDIS_CLUSTER

parts=("$@")
((${#parts[@]})) || parts=(pglock tidb replicas adversary faults failover netns)

started=$SECONDS
for part in "${parts[@]}"; do
  echo "== soak: $part ($(date -u '+%H:%M:%S'), load $(cut -d' ' -f1-3 /proc/loadavg))"
  case $part in
  pglock)
    # Every pglock strategy, mixed strategies and lock modes through the conformance suite.
    STOCKGUARD_PGLOCK=full go test -race -count=1 -run 'Conformance' ./pglock/ ;;
  tidb)
    # Every MySQL strategy on TiDB through the conformance suites and the harness.
    tidb=$(bash scripts/build-tidb.sh)
    echo "tidb-server: $tidb"
    STOCKGUARD_TIDB=1 go test -race -count=1 -run 'TiDB|Engine' ./mysqllock/ ./internal/backends/
    STOCKGUARD_TIDB=1 go test -race -count=1 -run 'TestStrategies_sound/tidb-' ./bench/ ;;
  replicas)
    # Every Redis strategy and the tiered front on Sentinel and on Cluster
    # with replicas, with and without WithReplicaAck; Redlock over voters
    # with replicas.
    STOCKGUARD_REPLICAS=full go test -race -count=1 -run 'TestStrategies_sound/(redis|tiered)-(sentinel|cluster)-' ./bench/
    STOCKGUARD_REPLICAS=full go test -race -count=1 -run 'TestRedlock_replicaAck|TestRedlockGuarded_replicaAck' ./redislock/ ./redislock/lock/ ;;
  adversary)
    # The adversarial checker, long runs on every target, TiDB's rows too.
    bash scripts/build-tidb.sh >/dev/null
    STOCKGUARD_TIDB=1 STOCKGUARD_ADVERSARY=long go test -race -count=1 -timeout 60m -run '(?i)adversar|repeatsAgree' ./... ;;
  faults)
    # Every fault × every strategy (docs/faults.md): about 30 minutes.
    STOCKGUARD_FAULTS=full go test -race -count=1 -timeout 60m -run TestRun_conservation ./bench/faults/ ;;
  failover)
    # Every strategy through Sentinel and Cluster failovers, with and
    # without WithReplicaAck: about 15 minutes.
    STOCKGUARD_FAILOVER=full go test -race -count=1 -parallel 5 -timeout 30m -run TestFailover ./bench/faults/ ;;
  netns)
    # Issue 47's kernel-retransmission case: an order sent while the link
    # drops every packet for longer than its caller waits, its repeat
    # refused, then the link heals and the kernel retransmits the first
    # attempt: Redis in a network namespace, PostgreSQL and MariaDB behind
    # a forwarder in one. Root only.
    if ((EUID != 0)); then
      echo "== soak: netns skipped: making a network namespace needs root"
      continue
    fi
    STOCKGUARD_NETNS=1 go test -race -count=1 -run 'netns' ./redislock/ ./pglock/ ./mysqllock/ ;;
  *)
    echo "unknown part $part (pglock tidb replicas adversary faults failover netns)" >&2
    exit 2 ;;
  esac
done
echo "== soak: ${parts[*]}: passed in $(((SECONDS - started) / 60)) min"
