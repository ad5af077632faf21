#!/usr/bin/env bash
# Runs "buzz-bench soak" at full size: two relay processes sharing Redis, 48
# connections over three communities for 10 minutes, with every fault
# injected once (relay kill -9, PostgreSQL stopped 10 s in fast and in
# immediate mode, the primary killed and its synchronous standby promoted,
# Redis stopped 10 s, the listener endpoint failing for a minute, a client
# that never reads, a 20 s connection storm from its own address: up to
# 100,000 connects, each refused 429 or its forged AUTH refused, and one
# hostile key running the abuse benchmark's attacks).
# Everything runs on loopback in a temporary directory; the summary is one
# JSON line on stdout, progress goes to stderr. Exit 1 means something
# acknowledged was lost or a relay did not recover.
#
#   scripts/soak.sh                        # the full-size run
#   scripts/soak.sh --duration 2m --conns 12 --faults kill-relay,pg-fast
#
# Flags after the script name replace the defaults of the same name.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/ensure-secp256k1.sh
scripts/ensure-postgres.sh
scripts/ensure-redis.sh
bin=$(mktemp -d /tmp/buzz-soak-bin.XXXXXX)
trap 'rm -rf "$bin"' EXIT
go build $(scripts/secp256k1-tags.sh) -o "$bin/" ./cmd/buzz-relay ./cmd/buzz-bench
"$bin/buzz-bench" soak --relays 2 --conns 48 --duration 10m --faults all \
  --pg-down 10s --redis-down 10s --listener-down 60s \
  --storm-conns 100000 --storm-time 20s --settle 5m "$@"
