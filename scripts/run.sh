#!/usr/bin/env bash
# Installs what is missing, builds, and starts buzz-relay on ws://localhost:3000.
# With no DATABASE_URL the relay runs its own PostgreSQL cluster under
# BUZZ_DATA_DIR (default ./buzz-data).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/ensure-secp256k1.sh
scripts/ensure-postgres.sh
mkdir -p bin
go build -o bin/buzz-relay ./cmd/buzz-relay
go build -o bin/buzz ./cmd/buzz
exec bin/buzz-relay serve
