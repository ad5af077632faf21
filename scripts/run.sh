#!/usr/bin/env bash
# Installs what is missing, builds, and starts buzz-relay on ws://localhost:3000.
# With no DATABASE_URL the relay runs its own PostgreSQL cluster under
# BUZZ_DATA_DIR (default ./buzz-data). The relay verifies signatures with
# libsecp256k1 where it is installed (scripts/secp256k1-tags.sh), else in
# pure Go; its start line names the one it runs.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/ensure-secp256k1.sh
scripts/ensure-postgres.sh
tags=$(scripts/secp256k1-tags.sh)
mkdir -p bin
go build $tags -o bin/buzz-relay ./cmd/buzz-relay
go build -o bin/buzz ./cmd/buzz
exec bin/buzz-relay serve
