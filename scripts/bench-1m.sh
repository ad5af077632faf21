#!/usr/bin/env bash
# Target P3 of docs/PERFORMANCE.md: REQ {kinds|authors|#e|#p, limit 50} on 1M events. Loads the
# "buzz-bench fixture" dataset (validly signed kind 9 events in 10 communities,
# COPY straight into PostgreSQL) into a private cluster once, then RUNS
# times starts buzz-relay on it and runs "buzz-bench req" against
# community c0, printing JSON lines: the fixture's report, then each run's.
#
#   scripts/bench-1m.sh [RUNS] [buzz-bench flags…]
#   scripts/bench-1m.sh 3
#   BENCH_1M_EVENTS=100000 scripts/bench-1m.sh 1 --req-seconds 5
#   BENCH_1M_CACHE=/var/tmp/bench-1m scripts/bench-1m.sh 3
#
# Environment:
#   BENCH_1M_EVENTS  events to load (default 1000000)
#   BENCH_1M_CACHE   directory that keeps the loaded data dir between runs
#                    (one subdirectory per size and port); later calls skip
#                    the load. The relay runs on the cached data itself:
#                    each buzz-bench run adds its one kind 9007 channel.
#                    Default: a temporary directory, loaded and removed on
#                    every call.
#   BENCH_RELAY_BIN  a prebuilt buzz-relay to measure; default: build
#                    ./cmd/buzz-relay from this tree
#   BENCH_ENV        extra VAR=value settings for the relay
#   BENCH_PORT       app port (default 3490); health +1, metrics +2
#
# The relay's deployment community (RELAY_URL) is
# deployment.bench.invalid:PORT, an empty one; the fixture's community c0
# also answers to localhost:PORT, the host buzz-bench connects to, and its
# authors, e and p values reach buzz-bench through --req-targets.
set -euo pipefail
cd "$(dirname "$0")/.."
# The per-user quotas are off (0) for this honest load, which is many
# users' worth from few keys; BENCH_ENV can set them again.
quotas_off="BUZZ_RATE_LIMIT_HUMAN_MESSAGES_PER_MIN=0 BUZZ_RATE_LIMIT_HUMAN_API_CALLS_PER_MIN=0
  BUZZ_RATE_LIMIT_HUMAN_WS_EVENTS_PER_SEC=0 BUZZ_RATE_LIMIT_AGENT_STANDARD_MESSAGES_PER_MIN=0
  BUZZ_RATE_LIMIT_AGENT_STANDARD_API_CALLS_PER_MIN=0 BUZZ_CHANNEL_CREATES_PER_HOUR=0 BUZZ_READ_TIME_PER_SECOND_MS=0"
runs=${1:-3}
shift || true
events=${BENCH_1M_EVENTS:-1000000}
port=${BENCH_PORT:-3490}
scripts/ensure-postgres.sh
bin=$(mktemp -d /tmp/buzz-bench.XXXXXX)
relay=
cleanup() {
  if [ -n "$relay" ]; then
    kill -TERM "$relay" 2>/dev/null || true
    wait "$relay" 2>/dev/null || true
  fi
  rm -rf "$bin"
}
trap cleanup EXIT

if [ -n "${BENCH_RELAY_BIN:-}" ]; then
  [ -x "$BENCH_RELAY_BIN" ] || { echo "BENCH_RELAY_BIN=$BENCH_RELAY_BIN is not an executable" >&2; exit 2; }
  go build -o "$bin/" ./cmd/buzz-bench
  relay_bin=$(realpath "$BENCH_RELAY_BIN")
else
  go build $(scripts/secp256k1-tags.sh) -o "$bin/" ./cmd/buzz-relay ./cmd/buzz-bench
  relay_bin=$bin/buzz-relay
fi

if [ -n "${BENCH_1M_CACHE:-}" ]; then
  mkdir -p "$BENCH_1M_CACHE"
  data=$(realpath "$BENCH_1M_CACHE")/events-$events-port-$port
else
  data=$bin/data
fi

start_relay() {
  env $quotas_off ${BENCH_ENV:-} BUZZ_DATA_DIR="$data" BUZZ_LOG_LEVEL=warn BUZZ_BIND_ADDR=127.0.0.1:$port \
    RELAY_URL=ws://deployment.bench.invalid:$port BUZZ_HEALTH_PORT=$((port + 1)) BUZZ_METRICS_PORT=$((port + 2)) \
    "$relay_bin" >>"$bin/relay.log" 2>&1 &
  relay=$!
  for _ in $(seq 1 480); do
    curl -fs "http://127.0.0.1:$((port + 1))/_readiness" >/dev/null 2>&1 && return 0
    kill -0 "$relay" 2>/dev/null || break
    sleep 0.25
  done
  echo "buzz-relay did not become ready; its log:" >&2
  cat "$bin/relay.log" >&2
  exit 1
}

stop_relay() {
  kill -TERM "$relay"
  wait "$relay" || true
  relay=
}

# fixture.json is written last: a data dir without it holds a partial load.
cached=true
if [ ! -f "$data/fixture.json" ]; then
  cached=false
  rm -rf "$data"
  start_relay # creates the private cluster and applies the migrations
  sock=$(sed -n 5p "$data/pg/data/postmaster.pid")
  "$bin/buzz-bench" fixture --database-url "postgres://buzz@/buzz?host=$sock&port=5432&sslmode=disable" \
    --events "$events" --alias "localhost:$port" --targets "$data/targets.json" >"$bin/fixture.json"
  stop_relay
  mv "$bin/fixture.json" "$data/fixture.json"
fi
echo "{\"phase\":\"fixture\",\"cached\":$cached,\"data_dir\":\"$data\",\"report\":$(cat "$data/fixture.json")}"

for run in $(seq 1 "$runs"); do
  start_relay
  pgpid=$(head -1 "$data/pg/data/postmaster.pid")
  echo "{\"run\":$run,\"relay_bin\":\"$relay_bin\",\"events\":$events}"
  "$bin/buzz-bench" req --relay "ws://localhost:$port" --pids "relay=$relay,postgres=$pgpid" \
    --req-targets "$data/targets.json" "$@" || true
  stop_relay
done
