#!/usr/bin/env bash
# Runs a relay benchmark of buzz-bench against a fresh buzz-relay (private
# cluster in a temporary directory, loopback only) RUNS times and prints
# each run's JSON lines; the relay's and PostgreSQL's CPU are sampled by
# buzz-bench.
#
#   scripts/bench.sh [RUNS] [SUBCOMMAND] [buzz-bench flags…]
#
# SUBCOMMAND is a relay benchmark of buzz-bench (ingest, http-ingest, req,
# fanout, idle, abuse); without one, "run", whose --phase lists several:
#   scripts/bench.sh 3 --conns 8 --events 20000 --phase ingest,req
#   BENCH_ENV="BUZZ_AUDIT_ENABLED=false" scripts/bench.sh 3 ingest
#   scripts/bench.sh 1 fanout --subscribers 1000 --rate 100 --fanout-seconds 10
#   BENCH_ENV="BUZZ_PPROF_ENABLED=true" scripts/bench.sh 1 idle --idle-conns 10000 \
#     --pprof http://127.0.0.1:3392/debug/pprof/heap --heap-profile /path/heap.pb.gz
#
# Environment:
#   BENCH_RELAY_BIN  a prebuilt buzz-relay to measure (e.g. an older build, to
#                    compare with the current one in the same session);
#                    default: build ./cmd/buzz-relay from this tree
#   BENCH_ENV        extra VAR=value settings for the relay
#   BENCH_PORT       app port (default 3390); health is +1, metrics (and
#                    pprof, with BUZZ_PPROF_ENABLED=true) +2
set -euo pipefail
cd "$(dirname "$0")/.."
# The per-user quotas are off (0) for this honest load, which is many
# users' worth from few keys; BENCH_ENV can set them again.
quotas_off="BUZZ_RATE_LIMIT_HUMAN_MESSAGES_PER_MIN=0 BUZZ_RATE_LIMIT_HUMAN_API_CALLS_PER_MIN=0
  BUZZ_RATE_LIMIT_HUMAN_WS_EVENTS_PER_SEC=0 BUZZ_RATE_LIMIT_AGENT_STANDARD_MESSAGES_PER_MIN=0
  BUZZ_RATE_LIMIT_AGENT_STANDARD_API_CALLS_PER_MIN=0 BUZZ_CHANNEL_CREATES_PER_HOUR=0 BUZZ_READ_TIME_PER_SECOND_MS=0"
runs=${1:-3}
shift || true
cmd=run
if [ $# -gt 0 ] && [ "${1#-}" = "$1" ]; then
  cmd=$1
  shift
fi
scripts/ensure-postgres.sh
if [ -n "${BENCH_RELAY_BIN:-}" ] && [ ! -x "$BENCH_RELAY_BIN" ]; then
  echo "BENCH_RELAY_BIN=$BENCH_RELAY_BIN is not an executable" >&2
  exit 2
fi
bin=$(mktemp -d /tmp/buzz-bench.XXXXXX)
trap 'rm -rf "$bin"' EXIT
if [ -n "${BENCH_RELAY_BIN:-}" ]; then
  go build -o "$bin/" ./cmd/buzz-bench
  relay_bin=$(realpath "$BENCH_RELAY_BIN")
else
  go build $(scripts/secp256k1-tags.sh) -o "$bin/" ./cmd/buzz-relay ./cmd/buzz-bench
  relay_bin=$bin/buzz-relay
fi
port=${BENCH_PORT:-3390}
for run in $(seq 1 "$runs"); do
  data="$bin/data-$run"
  env $quotas_off ${BENCH_ENV:-} BUZZ_DATA_DIR="$data" BUZZ_LOG_LEVEL=warn BUZZ_BIND_ADDR=127.0.0.1:$port \
    RELAY_URL=ws://localhost:$port BUZZ_HEALTH_PORT=$((port + 1)) BUZZ_METRICS_PORT=$((port + 2)) \
    "$relay_bin" >"$bin/relay-$run.log" 2>&1 &
  relay=$!
  for _ in $(seq 1 120); do
    curl -fs "http://127.0.0.1:$((port + 1))/_readiness" >/dev/null 2>&1 && break
    sleep 0.25
  done
  pgpid=$(head -1 "$data/pg/data/postmaster.pid")
  echo "{\"run\":$run,\"relay_bin\":\"$relay_bin\"}"
  "$bin/buzz-bench" "$cmd" --relay "ws://localhost:$port" --pids "relay=$relay,postgres=$pgpid" "$@" || true
  kill -TERM "$relay"
  wait "$relay" || true
done
rm -rf "$bin"
