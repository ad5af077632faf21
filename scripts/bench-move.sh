#!/usr/bin/env bash
# Moving a team (docs/PERFORMANCE.md "Export and import"): publishes EVENTS
# kind 9 messages into one community of a fresh buzz-relay (private cluster
# in a temporary directory, loopback only) with buzz-bench ingest, then,
# while that relay keeps serving, times "buzz-relay community export" of the
# community into a file and "buzz-relay community import" of the file into a
# new community of the same database, each under /usr/bin/time (wall
# seconds and peak RSS). Prints one JSON line per step.
#
#   scripts/bench-move.sh            # 1,000,000 events
#   BENCH_MOVE_EVENTS=20000 scripts/bench-move.sh
#
# Environment:
#   BENCH_MOVE_EVENTS  events to publish (default 1000000)
#   BENCH_MOVE_GZIP    1: export and import a .jsonl.gz file (default: plain)
#   BENCH_PORT         app port (default 3590); health +1, metrics +2
set -euo pipefail
cd "$(dirname "$0")/.."
# The per-user quotas are off (0) for this load, which is many users' worth
# from few keys.
quotas_off="BUZZ_RATE_LIMIT_HUMAN_MESSAGES_PER_MIN=0 BUZZ_RATE_LIMIT_HUMAN_API_CALLS_PER_MIN=0
  BUZZ_RATE_LIMIT_HUMAN_WS_EVENTS_PER_SEC=0 BUZZ_RATE_LIMIT_AGENT_STANDARD_MESSAGES_PER_MIN=0
  BUZZ_RATE_LIMIT_AGENT_STANDARD_API_CALLS_PER_MIN=0 BUZZ_CHANNEL_CREATES_PER_HOUR=0 BUZZ_READ_TIME_PER_SECOND_MS=0"
events=${BENCH_MOVE_EVENTS:-1000000}
port=${BENCH_PORT:-3590}
scripts/ensure-postgres.sh
[ -x /usr/bin/time ] || { echo "bench-move.sh needs /usr/bin/time (Debian: apt-get install time)" >&2; exit 2; }
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
go build $(scripts/secp256k1-tags.sh) -o "$bin/" ./cmd/buzz-relay ./cmd/buzz-bench

# One relay key for the serving relay and both commands: the import signs
# the channel state it regenerates with it.
export BUZZ_RELAY_PRIVATE_KEY=$(head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n')
data=$bin/data
env $quotas_off BUZZ_DATA_DIR="$data" BUZZ_LOG_LEVEL=warn BUZZ_BIND_ADDR=127.0.0.1:$port \
  RELAY_URL=ws://localhost:$port BUZZ_HEALTH_PORT=$((port + 1)) BUZZ_METRICS_PORT=$((port + 2)) \
  "$bin/buzz-relay" >"$bin/relay.log" 2>&1 &
relay=$!
for _ in $(seq 1 240); do
  curl -fs "http://127.0.0.1:$((port + 1))/_readiness" >/dev/null 2>&1 && break
  kill -0 "$relay" 2>/dev/null || { cat "$bin/relay.log" >&2; exit 1; }
  sleep 0.25
done
sock=$(sed -n 5p "$data/pg/data/postmaster.pid")
export DATABASE_URL="postgres://buzz@/buzz?host=$sock&port=5432&sslmode=disable"

# buzz-bench signs a run's events before it publishes them, and the relay
# refuses an event more than 900 s from its clock: runs of at most 200,000
# events each finish well inside that.
start=$SECONDS
left=$events
while [ "$left" -gt 0 ]; do
  n=$((left < 200000 ? left : 200000))
  "$bin/buzz-bench" ingest --relay "ws://localhost:$port" --events "$n" --conns 8 --inflight 4 \
    --duration 14m >"$bin/ingest.json"
  echo "{\"step\":\"publish\",\"events\":$n,\"summary\":$(tail -1 "$bin/ingest.json")}"
  left=$((left - n))
done
stored=$(psql "$DATABASE_URL" -Atc "SELECT count(*) FROM events e JOIN communities c ON c.id = e.community_id WHERE c.host = 'localhost:$port'")
echo "{\"step\":\"published\",\"events\":$events,\"stored\":$stored,\"seconds\":$((SECONDS - start))}"

file=$bin/move.jsonl
[ "${BENCH_MOVE_GZIP:-0}" = 1 ] && file=$file.gz
# measure NAME CMD…: runs CMD under /usr/bin/time and prints its line.
measure() {
  local name=$1
  shift
  /usr/bin/time -f '%e %M' -o "$bin/time" "$@" >"$bin/$name.out" 2>"$bin/$name.err" ||
    { cat "$bin/$name.err" >&2; exit 1; }
  read -r wall rss <"$bin/time"
  local rate
  rate=$(awk -v n="$stored" -v s="$wall" 'BEGIN { printf "%.0f", (s > 0 ? n / s : 0) }')
  echo "{\"step\":\"$name\",\"seconds\":$wall,\"events_per_second\":$rate,\"peak_rss_kib\":$rss,\"report\":$(tail -1 "$bin/$name.out")}"
}
measure export "$bin/buzz-relay" community export --host "localhost:$port" --output "$file" --quiet
echo "{\"step\":\"file\",\"bytes\":$(stat -c %s "$file")}"
"$bin/buzz-relay" community add --host moved.bench.invalid >/dev/null
measure import "$bin/buzz-relay" community import --host moved.bench.invalid --file "$file" --quiet
