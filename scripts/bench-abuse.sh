#!/usr/bin/env bash
# Runs "buzz-bench abuse" (docs/PERFORMANCE.md "Abuse
# benchmark") against a fresh buzz-relay: private cluster in a temporary
# directory, loopback only, the relay's DEFAULT limits and per-user quotas
# (nothing is zeroed here, unlike the other bench scripts). The honest
# clients use the deployment community localhost:PORT; the attacker uses
# a second community, attacked.bench.invalid:PORT, added with
# `buzz-relay community add` on the same relay. Prints the JSON lines.
#
#   scripts/bench-abuse.sh [buzz-bench flags…]
#   scripts/bench-abuse.sh --abuse-seconds 15 --abuse-attacks wide-req,read-flood  # quicker, noisier p99s
#   scripts/bench-abuse.sh --abuse-scale 0.05   # against a relay without the defences
#
# Environment:
#   BENCH_RELAY_BIN  a prebuilt buzz-relay to measure; default: build
#                    ./cmd/buzz-relay from this tree
#   BENCH_ENV        extra VAR=value settings for the relay
#   BENCH_PORT       app port (default 3590); health +1, metrics +2
set -euo pipefail
cd "$(dirname "$0")/.."
port=${BENCH_PORT:-3590}
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
data=$bin/data
env ${BENCH_ENV:-} BUZZ_DATA_DIR="$data" BUZZ_LOG_LEVEL=warn BUZZ_BIND_ADDR=127.0.0.1:$port \
  RELAY_URL=ws://localhost:$port BUZZ_HEALTH_PORT=$((port + 1)) BUZZ_METRICS_PORT=$((port + 2)) \
  "$relay_bin" >"$bin/relay.log" 2>&1 &
relay=$!
ready=false
for _ in $(seq 1 240); do
  if curl -fs "http://127.0.0.1:$((port + 1))/_readiness" >/dev/null 2>&1; then
    ready=true
    break
  fi
  kill -0 "$relay" 2>/dev/null || break
  sleep 0.25
done
if [ "$ready" != true ]; then
  echo "buzz-relay did not become ready; its log:" >&2
  cat "$bin/relay.log" >&2
  exit 1
fi
sock=$(sed -n 5p "$data/pg/data/postmaster.pid")
attacked=attacked.bench.invalid:$port
env DATABASE_URL="postgres://buzz@/buzz?host=$sock&port=5432&sslmode=disable" RELAY_URL=ws://localhost:$port \
  BUZZ_LOG_LEVEL=warn "$relay_bin" community add --host "$attacked" >/dev/null
pgpid=$(head -1 "$data/pg/data/postmaster.pid")
echo "{\"relay_bin\":\"$relay_bin\",\"attacked_host\":\"$attacked\"}"
"$bin/buzz-bench" abuse --relay "ws://localhost:$port" --pids "relay=$relay,postgres=$pgpid" \
  --abuse-host "$attacked" --duration 40m "$@" || true
