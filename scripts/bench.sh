#!/usr/bin/env bash
# Runs cmd/buzz-bench against a fresh buzz-relay (private cluster in a
# temporary directory, loopback only) RUNS times and prints each run's JSON
# lines; the relay's and PostgreSQL's CPU are sampled by buzz-bench.
#
#   scripts/bench.sh [RUNS] [buzz-bench flags…]
#   scripts/bench.sh 3 --conns 8 --events 20000 --phase ingest,req
#   BENCH_ENV="BUZZ_AUDIT_ENABLED=false" scripts/bench.sh 3 --phase ingest
set -euo pipefail
cd "$(dirname "$0")/.."
runs=${1:-3}
shift || true
scripts/ensure-postgres.sh
bin=$(mktemp -d /tmp/buzz-bench.XXXXXX)
go build -o "$bin/" ./cmd/buzz-relay ./cmd/buzz-bench
port=${BENCH_PORT:-3390}
for run in $(seq 1 "$runs"); do
  data="$bin/data-$run"
  env ${BENCH_ENV:-} BUZZ_DATA_DIR="$data" BUZZ_LOG_LEVEL=warn BUZZ_BIND_ADDR=127.0.0.1:$port \
    RELAY_URL=ws://localhost:$port BUZZ_HEALTH_PORT=$((port + 1)) BUZZ_METRICS_PORT=$((port + 2)) \
    "$bin/buzz-relay" >"$bin/relay-$run.log" 2>&1 &
  relay=$!
  for _ in $(seq 1 120); do
    curl -fs "http://127.0.0.1:$((port + 1))/_readiness" >/dev/null 2>&1 && break
    sleep 0.25
  done
  pgpid=$(head -1 "$data/pg/data/postmaster.pid")
  echo "{\"run\":$run}"
  "$bin/buzz-bench" --relay "ws://localhost:$port" --pids "relay=$relay,postgres=$pgpid" "$@" || true
  kill -TERM "$relay"
  wait "$relay" || true
done
rm -rf "$bin"
