#!/usr/bin/env bash
# The scale-out benchmarks (P1 and P5 of docs/PERFORMANCE.md), on loopback: one
# throwaway PostgreSQL (cmd/buzz-testdb), one throwaway redis-server, and
# for each of 1, 2 and 4 processes that many buzz-relay processes on one
# fresh database, sharing DATABASE_URL, REDIS_URL and BUZZ_RELAY_PRIVATE_KEY.
# All serve one community: RELAY_URL is the first process's, and the other
# processes' hosts (localhost:PORT) are added as its aliases with
# `buzz-relay community add-host`, so clients dial each process directly.
#
# Each round runs "buzz-bench ingest" (P1) spread round-robin over the
# processes; the 2-process round also runs "buzz-bench fanout" (P5) twice:
# single-process (publisher and subscribers on process 1) and cross-process
# (publisher on process 1, subscribers on process 2), in alternating order.
# Rounds are interleaved (run 1: 1, 2, 4 processes; run 2: …) so that drift
# of the machine spreads over all of them. Every buzz-bench line is printed
# with "run", "processes" and, for fanout, "layout" in front; the last
# lines are the medians over the runs.
#
#   scripts/bench-scale.sh [RUNS] [buzz-bench flags…]
#   scripts/bench-scale.sh 3 --events 20000 --subscribers 1000 --rate 100 --fanout-seconds 10
#
# The flags go to every buzz-bench call (ingest flags do nothing to the
# fanout phase and the other way round); the script sets --relay,
# --sub-relay and --pids and the subcommand itself. The cluster has fsync,
# synchronous_commit and full_page_writes back on (ALTER SYSTEM) so the
# ingest is durable, as P1 asks; BENCH_DURABLE=0 keeps buzz-testdb's
# non-durable settings. BENCH_PROCS picks the rounds (default "1 2 4"; the
# fanout runs in round 2). BENCH_ENV adds variables to every relay, e.g.
# BENCH_ENV="BUZZ_AUDIT_ENABLED=false". Everything lives in one temporary
# directory, removed at the end; nothing is left in /tmp.
set -euo pipefail
cd "$(dirname "$0")/.."
# The per-user quotas are off (0) for this honest load, which is many
# users' worth from few keys; BENCH_ENV can set them again.
quotas_off="BUZZ_RATE_LIMIT_HUMAN_MESSAGES_PER_MIN=0 BUZZ_RATE_LIMIT_HUMAN_API_CALLS_PER_MIN=0
  BUZZ_RATE_LIMIT_HUMAN_WS_EVENTS_PER_SEC=0 BUZZ_RATE_LIMIT_AGENT_STANDARD_MESSAGES_PER_MIN=0
  BUZZ_RATE_LIMIT_AGENT_STANDARD_API_CALLS_PER_MIN=0 BUZZ_CHANNEL_CREATES_PER_HOUR=0 BUZZ_READ_TIME_PER_SECOND_MS=0"

runs=${1:-3}
shift || true
case $runs in '' | *[!0-9]* | 0)
  echo "bench-scale.sh: RUNS must be a positive number, got \"$runs\"; usage: scripts/bench-scale.sh [RUNS] [buzz-bench flags…]" >&2
  exit 2
  ;;
esac

procs=${BENCH_PROCS:-1 2 4}
for n in $procs; do
  case $n in 1 | 2 | 3 | 4) ;; *)
    echo "bench-scale.sh: BENCH_PROCS holds process counts from 1 to 4, got \"$procs\"" >&2
    exit 2
    ;;
  esac
done

scripts/ensure-postgres.sh
scripts/ensure-redis.sh

dir=$(mktemp -d /tmp/buzz-bench-scale.XXXXXX)
relay_pids=()
redis_pid=

stop_relays() {
  local pid log
  for pid in "${relay_pids[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
  for pid in "${relay_pids[@]}"; do wait "$pid" 2>/dev/null || true; done
  relay_pids=()
  for log in "$dir"/relay-*.log; do # the relays' errors, which the figures do not show
    [ -s "$log" ] || continue
    grep -iE '"level":"(error|warn)"|level=(error|warn)' "$log" | head -5 | sed "s|^|$(basename "$log"): |" >&2 || true
    : >"$log"
  done
}

cleanup() {
  stop_relays
  if [ -n "$redis_pid" ]; then
    kill -TERM "$redis_pid" 2>/dev/null || true
    wait "$redis_pid" 2>/dev/null || true
  fi
  "$dir/buzz-testdb" stop "$dir/pg" >/dev/null 2>&1 || true
  rm -rf "$dir"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

go build $(scripts/secp256k1-tags.sh) -o "$dir/" ./cmd/buzz-relay ./cmd/buzz-bench ./cmd/buzz-testdb

# free_port VAR sets VAR to a loopback TCP port nobody listens on and that
# this script has not handed out yet (no subshell, so the list is kept).
taken=" "
free_port() {
  local p
  while :; do
    p=$((20000 + RANDOM % 40000))
    case $taken in *" $p "*) continue ;; esac
    if ! (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null; then
      taken="$taken$p "
      printf -v "$1" '%s' "$p"
      return
    fi
  done
}

# PostgreSQL.
base_url=$("$dir/buzz-testdb" start "$dir/pg")
pg_pid=$(head -1 "$dir/pg/pg/data/postmaster.pid")
if [ "${BENCH_DURABLE:-1}" != 0 ]; then
  psql -q -X "$base_url" -v ON_ERROR_STOP=1 \
    -c "ALTER SYSTEM SET fsync = on" -c "ALTER SYSTEM SET synchronous_commit = on" \
    -c "ALTER SYSTEM SET full_page_writes = on" -c "SELECT pg_reload_conf()" >/dev/null
  sleep 0.5 # the postmaster rereads its configuration asynchronously
fi
durability=$(psql -X -At "$base_url" -c "SELECT current_setting('fsync') || '/' || current_setting('synchronous_commit')")

# Redis.
free_port redis_port
redis-server --bind 127.0.0.1 --port "$redis_port" --save '' --appendonly no \
  --dir "$dir" --logfile "$dir/redis.log" >/dev/null 2>&1 &
redis_pid=$!
for _ in $(seq 1 100); do
  redis-cli -p "$redis_port" ping >/dev/null 2>&1 && break
  sleep 0.1
done
redis-cli -p "$redis_port" ping >/dev/null || { echo "bench-scale.sh: redis-server did not start; see its log:" >&2; cat "$dir/redis.log" >&2; exit 1; }
redis_url="redis://127.0.0.1:$redis_port"

relay_key=$(od -An -tx1 -N32 /dev/urandom | tr -d ' \n')

# Four processes' ports, reused by every round: app, health, metrics.
declare -a app_port health_port metrics_port
for i in 1 2 3 4; do
  free_port "app_port[$i]"
  free_port "health_port[$i]"
  free_port "metrics_port[$i]"
done

# start_relay I DBURL starts process I on the database at DBURL.
start_relay() {
  local i=$1 db=$2
  env $quotas_off ${BENCH_ENV:-} DATABASE_URL="$db" REDIS_URL="$redis_url" BUZZ_RELAY_PRIVATE_KEY="$relay_key" \
    BUZZ_AUTO_MIGRATE=true RELAY_URL="ws://localhost:${app_port[1]}" BUZZ_DATA_DIR="$dir/data-$i" \
    BUZZ_BIND_ADDR="127.0.0.1:${app_port[i]}" BUZZ_HEALTH_PORT="${health_port[i]}" \
    BUZZ_METRICS_PORT="${metrics_port[i]}" BUZZ_LOG_LEVEL=warn \
    "$dir/buzz-relay" serve >>"$dir/relay-$i.log" 2>&1 &
  relay_pids+=($!)
}

# wait_ready I waits until process I answers /_readiness and is connected
# to Redis (buzz_pubsub_connected 1).
wait_ready() {
  local i=$1
  for _ in $(seq 1 240); do
    if curl -fs "http://127.0.0.1:${health_port[i]}/_readiness" >/dev/null 2>&1 &&
      curl -fs "http://127.0.0.1:${metrics_port[i]}/metrics" 2>/dev/null | grep -qx 'buzz_pubsub_connected 1'; then
      return 0
    fi
    sleep 0.25
  done
  echo "bench-scale.sh: relay process $i is not ready after 60 s; its log:" >&2
  tail -20 "$dir/relay-$i.log" >&2
  exit 1
}

# label RUN N [LAYOUT] puts "run", "processes" (and "layout") in front of
# every JSON line it reads.
label() {
  local extra="\"run\":$1,\"processes\":$2,"
  [ -n "${3:-}" ] && extra="$extra\"layout\":\"$3\","
  sed -u "s/^{/{$extra/"
}

# fanout RUN LAYOUT SUBPROC [FLAGS…] runs the fanout phase with the
# publisher on process 1 and the subscribers on process SUBPROC.
fanout() {
  local run=$1 layout=$2 sub=$3
  shift 3
  "$dir/buzz-bench" fanout --relay "ws://localhost:${app_port[1]}" --sub-relay "ws://localhost:${app_port[sub]}" \
    --pids "$pids" "$@" | label "$run" 2 "$layout" || true
}

# loadavg is the machine's 1, 5 and 15 minute load: figures taken on a
# machine that runs other work are not comparable with an idle one's.
loadavg() { cut -d' ' -f1-3 /proc/loadavg 2>/dev/null || echo unknown; }
echo "{\"setup\":\"bench-scale\",\"runs\":$runs,\"processes\":\"$procs\",\"postgres_fsync_synchronous_commit\":\"$durability\",\"redis\":\"$redis_url\",\"cores\":$(nproc),\"loadavg\":\"$(loadavg)\",\"flags\":\"$*\"}"
results="$dir/results.jsonl"
for run in $(seq 1 "$runs"); do
  for n in $procs; do
    db="bench_r${run}_n$n"
    psql -q -X "$base_url" -v ON_ERROR_STOP=1 -c "CREATE DATABASE $db" >/dev/null
    db_url=${base_url/\/buzz\?//$db?}
    start_relay 1 "$db_url"
    wait_ready 1
    for i in $(seq 2 "$n"); do
      env DATABASE_URL="$db_url" RELAY_URL="ws://localhost:${app_port[1]}" BUZZ_LOG_LEVEL=warn \
        "$dir/buzz-relay" community add-host --host "localhost:${app_port[i]}" >/dev/null
      start_relay "$i" "$db_url"
    done
    for i in $(seq 2 "$n"); do wait_ready "$i"; done
    list="ws://localhost:${app_port[1]}"
    for i in $(seq 2 "$n"); do list="$list,ws://localhost:${app_port[i]}"; done
    pids="relay=$(
      IFS=+
      echo "${relay_pids[*]}"
    ),postgres=$pg_pid,redis=$redis_pid"
    "$dir/buzz-bench" ingest --relay "$list" --pids "$pids" "$@" | label "$run" "$n" | tee -a "$results" || true
    if [ "$n" = 2 ]; then
      if [ $((run % 2)) = 1 ]; then
        fanout "$run" single-process 1 "$@" | tee -a "$results"
        fanout "$run" cross-process 2 "$@" | tee -a "$results"
      else
        fanout "$run" cross-process 2 "$@" | tee -a "$results"
        fanout "$run" single-process 1 "$@" | tee -a "$results"
      fi
    fi
    stop_relays
    psql -q -X "$base_url" -c "DROP DATABASE $db" >/dev/null
    echo "{\"run\":$run,\"processes\":$n,\"phase\":\"round-done\",\"loadavg\":\"$(loadavg)\"}"
  done
done

# median KEY FILTER prints "KEY":median,"KEY_runs":[…] over the number KEY
# of the result lines matching FILTER (a regular expression).
median() {
  grep -E "$2" "$results" | grep -oE "\"$1\":-?[0-9.e+-]+" | cut -d: -f2 | sort -g |
    awk -v k="$1" '{v[NR]=$1} END {
      if (NR==0) { printf "\"%s\":null,\"%s_runs\":[]", k, k; exit }
      m = (NR%2) ? v[(NR+1)/2] : (v[NR/2]+v[NR/2+1])/2
      printf "\"%s\":%s,\"%s_runs\":[", k, m, k
      for (i=1;i<=NR;i++) printf "%s%s", (i>1?",":""), v[i]; printf "]"}'
}
for n in $procs; do
  f="\"processes\":$n,\"phase\":\"ingest\""
  echo "{\"median\":\"ingest\",\"processes\":$n,$(median events_per_sec "$f"),$(median ok_p50_ms "$f"),$(median ok_p99_ms "$f")}"
done
for layout in single-process cross-process; do
  f="\"layout\":\"$layout\",\"phase\":\"fanout\""
  line="{\"median\":\"fanout\",\"layout\":\"$layout\""
  for key in p50_ms p99_ms max_ms send_p50_ms send_p99_ms ok_p99_ms missing duplicates; do
    line="$line,$(median "$key" "$f")"
  done
  echo "$line}"
done

cleanup
trap - EXIT
# Everything the run made (binaries, cluster and its socket, Redis's
# directory, logs) lived under $dir.
if [ -e "$dir" ]; then
  echo "bench-scale.sh: $dir was left behind; remove it by hand" >&2
  exit 1
fi
