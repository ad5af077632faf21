#!/usr/bin/env bash
# The whole test suite: the lint steps of `make lint` (gofmt, go vet,
# golangci-lint; any finding fails the run), one throwaway PostgreSQL cluster
# for the run, every package's tests (race detector on when cgo can build
# it), then a short fuzz run of each parser that reads bytes from outside.
# A run must leave nothing of its own in /tmp: the last step checks it.
#
# Time (docs/PERFORMANCE.md, "Test suite time"): every go command builds with
# -trimpath, so the build cache does not depend on where the clone is. A
# fresh clone in a new folder (CI) then reuses the compiled packages, race
# and fuzz builds of earlier runs on the machine instead of compiling all of
# them again, and golangci-lint lives outside the clone (scripts/lint.sh).
set -euo pipefail
cd "$(dirname "$0")/.."

case " ${GOFLAGS:-} " in
  *" -trimpath "*) ;;
  *) export GOFLAGS="${GOFLAGS:+$GOFLAGS }-trimpath" ;;
esac

ours() { ls -1 /tmp | grep '^buzz-' | sort || true; }
tmp_before=$(ours)

scripts/ensure-secp256k1.sh
scripts/lint.sh
scripts/check-file-sizes.sh
scripts/ensure-postgres.sh
scripts/ensure-redis.sh
# Each step's end is printed with the seconds since the start (SECONDS), so a
# slow run shows where its time went.
step() { echo "test.sh: $1 done at ${SECONDS} s" >&2; }
step "lint and setup"

dir=$(mktemp -d /tmp/buzz-test.XXXXXX)
go build -o "$dir/buzz-testdb" ./cmd/buzz-testdb
cleanup() { "$dir/buzz-testdb" stop "$dir/pg" >/dev/null 2>&1 || true; rm -rf "$dir"; }
trap cleanup EXIT
TEST_DATABASE_URL=$("$dir/buzz-testdb" start "$dir/pg")
export TEST_DATABASE_URL

race=()
if command -v gcc >/dev/null 2>&1 && [ "${BUZZ_TEST_RACE:-1}" != 0 ]; then
  race=(-race)
else
  echo "note: gcc not found, running without the race detector" >&2
fi

# The C verifier where libsecp256k1 links (as scripts/run.sh builds the
# relay), through GOFLAGS so the binaries tests build for themselves get it
# too; then the default pure-Go build of the one package that differs.
tags=$(scripts/secp256k1-tags.sh)

# The fuzz targets: one "package target" a line.
fuzz_targets='
./internal/wire FuzzClientMessage
./internal/wire FuzzParseClientEvent
./internal/negentropy FuzzRespond
./internal/event FuzzParseFilter
./internal/event FuzzParseEvent
./internal/event FuzzParseSimple
./internal/auth FuzzNIP98Header
./internal/auth FuzzNIP42RelayTag
./internal/tenant FuzzNormalize
./internal/httpapi FuzzQueryBody
./internal/httpapi FuzzListenerTargets
./internal/read FuzzSnapshotRequest
./internal/read FuzzQueryOptions
./internal/window FuzzParseBatch
./internal/window FuzzParseChannel
./internal/config FuzzLoad
./internal/config FuzzOperatorListeners
'

fuzztime=${FUZZTIME:-5s}
# Each target is time-boxed (-fuzztime), so the step's length is the number
# of targets times (fuzztime + build and start-up) over the targets run at
# once: FUZZ_JOBS of them side by side (default: the core count), each with
# one fuzz worker (-parallel=1), so they share the cores instead of taking
# turns on all of them. Each target's output is printed whole when it ends.
# 5 s a target keeps the step a check that every parser still survives its
# seeds and a short exploration; `make fuzz` (FUZZTIME=2m) explores.
fuzz_jobs=${FUZZ_JOBS:-$(getconf _NPROCESSORS_ONLN 2>/dev/null || echo 2)}
fuzz_one() {
  local pkg=$1 target=$2 out
  # A failure that wrote no failing input is the fuzz engine giving up on a
  # stalled worker of a loaded machine ("context deadline exceeded"), not a
  # finding: run that target once more. A real finding fails at once.
  if out=$(go test -run='^$' -fuzz="^$target\$" -fuzztime="$fuzztime" -parallel=1 "$pkg" 2>&1 </dev/null); then
    printf 'fuzz %s (%s) for %s\n%s\n' "$target" "$pkg" "$fuzztime" "$(echo "$out" | tail -2)"
    return 0
  fi
  if echo "$out" | grep -q "Failing input written to"; then
    printf 'fuzz %s (%s) for %s: FAILED\n%s\n' "$target" "$pkg" "$fuzztime" "$out"
    return 1
  fi
  local first=$out
  if out=$(go test -run='^$' -fuzz="^$target\$" -fuzztime="$fuzztime" -parallel=1 "$pkg" 2>&1 </dev/null); then
    printf 'fuzz %s (%s) for %s\n%s\nfuzz %s: the engine stopped without a failing input; ran it once more:\n%s\n' \
      "$target" "$pkg" "$fuzztime" "$first" "$target" "$(echo "$out" | tail -2)"
    return 0
  fi
  printf 'fuzz %s (%s) for %s: FAILED twice\n%s\n%s\n' "$target" "$pkg" "$fuzztime" "$first" "$out"
  return 1
}
# fuzz_all runs every target, FUZZ_JOBS at a time, and fails when one
# failed.
fuzz_all() {
  local pids=() failed=0 pkg target pid
  while read -r pkg target; do
    [ -n "$pkg" ] || continue
    while [ "$(jobs -pr | wc -l)" -ge "$fuzz_jobs" ]; do wait -n || true; done
    fuzz_one "$pkg" "$target" &
    pids+=($!)
  done <<<"$fuzz_targets"
  for pid in "${pids[@]}"; do wait "$pid" || failed=1; done
  step "fuzz"
  return "$failed"
}

# go test runs two packages at a time (-p, the core count) and starts them in
# the order given: the packages whose tests take longest go first, so they
# run beside the many short ones instead of starting late and finishing
# alone at the end of the run (docs/PERFORMANCE.md, "Test suite time"). A
# name here that is no package fails the run, so the list stays true.
#
# The packages whose tests run buzz-relay only as a process of its own
# (the binary their TestMain builds, without the race detector) are apart:
# their test processes hold clients, a load generator and process control,
# not the relay, so they run without -race (docs/PERFORMANCE.md, "Test suite
# time"), one after the other in a go test of their own beside the others.
# internal/soak's tests are short soak runs (30 s each, a few relay
# processes and their own cluster) that spend most of their time waiting:
# four at a time. The two apart packages run side by side, as both mostly
# wait on processes and real time. The fuzz step follows them there: it then
# runs beside the last of the other packages, when go test's two slots no
# longer keep both cores busy, instead of after everything.
mod=$(go list -m)
apart=("$mod/internal/soak" "$mod/cmd/buzz-relay")
pkgs=()
for p in internal/e2e internal/window cmd/buzz-bench internal/app internal/replica; do
  pkgs+=("$mod/$p")
done
while read -r p; do
  case " ${pkgs[*]} ${apart[*]} " in *" $p "*) ;; *) pkgs+=("$p") ;; esac
done < <(go list ./...)
tagged="$GOFLAGS${tags:+ $tags}"
# A background job's exit status goes through a file: bash forgets the
# status of a job that ended long before its wait once another child of
# the shell gets its pid (the suite starts tens of thousands of processes
# and pids wrap at 32768), and its wait then fails with "not a child of
# this shell" although the job passed.
(
  failed=0
  (GOFLAGS=$tagged go test -count=1 -timeout 20m -parallel 4 "${apart[0]}"; echo $? >"$dir/soak.status") &
  soak_pid=$!
  GOFLAGS=$tagged go test -count=1 -timeout 20m "${apart[1]}" || failed=1
  wait "$soak_pid" 2>/dev/null || true
  [ "$(cat "$dir/soak.status" 2>/dev/null)" = 0 ] || failed=1
  step "go test ${apart[*]#"$mod/"}"
  fuzz_all || failed=1
  echo "$failed" >"$dir/apart.status"
) &
apart_pid=$!
tests_failed=0
GOFLAGS=$tagged go test "${race[@]}" -count=1 -timeout 20m "${pkgs[@]}" || tests_failed=1
[ -z "$tags" ] || go test "${race[@]}" -count=1 ./internal/event || tests_failed=1
step "go test (the other packages)"
wait "$apart_pid" 2>/dev/null || true
[ "$(cat "$dir/apart.status" 2>/dev/null)" = 0 ] || tests_failed=1
[ "$tests_failed" = 0 ] || exit 1

left=$(comm -13 <(echo "$tmp_before") <(ours) | grep -vx "$(basename "$dir")" || true)
if [ -n "$left" ]; then
  echo "the test run left these behind in /tmp:" >&2
  echo "$left" | sed 's|^|  /tmp/|' >&2
  exit 1
fi
