#!/usr/bin/env bash
# Installs libsecp256k1's headers and library (Debian libsecp256k1-dev) when
# they are missing and this shell can: as root with apt-get, running
# apt-get update only when the first install fails. The library is optional:
# the relay builds and runs without it on the pure-Go verifier, and the
# scripts add -tags=libsecp256k1 only where scripts/secp256k1-tags.sh finds
# it usable. So this script never fails: without the library it says which
# verifier the build will use and how to get the faster one. Quiet when the
# library is present, when cgo is off (CGO_ENABLED=0) or when
# BUZZ_SECP256K1=0 asks for the pure-Go verifier.
set -euo pipefail

header=/usr/include/secp256k1_schnorrsig.h

if [ -f "$header" ] || [ "${CGO_ENABLED:-}" = 0 ] || [ "${BUZZ_SECP256K1:-}" = 0 ]; then
  exit 0
fi
if [ "$(id -u)" -eq 0 ] && command -v apt-get >/dev/null 2>&1; then
  echo "installing libsecp256k1 (apt-get install -y libsecp256k1-dev)..." >&2
  export DEBIAN_FRONTEND=noninteractive
  if apt-get install -y -qq libsecp256k1-dev >/dev/null 2>&1 ||
    { apt-get update -qq >/dev/null 2>&1 && apt-get install -y -qq libsecp256k1-dev >/dev/null 2>&1; }; then
    [ -f "$header" ] && exit 0
  fi
fi
cat >&2 <<MSG
note: libsecp256k1's headers ($header) are missing, so the relay is built
with the pure-Go signature verifier (about four times the CPU per event).
For the faster one, install them and build again:

    sudo apt-get update && sudo apt-get install -y libsecp256k1-dev
MSG
