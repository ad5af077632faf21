#!/usr/bin/env bash
# Ensures libsecp256k1's headers and library (Debian libsecp256k1-dev) are on
# this machine: with cgo, internal/event verifies Schnorr signatures through
# them. Quiet when they are present. As root it installs the package, running
# apt-get update only when the first install fails; otherwise it prints the
# command to run and fails. Without cgo (CGO_ENABLED=0) or with the tag in
# GOFLAGS (-tags=purego_secp256k1) the build uses the pure-Go verifier and
# needs none of this: the script exits at once.
set -euo pipefail

header=/usr/include/secp256k1_schnorrsig.h

if [ -f "$header" ] || [ "${CGO_ENABLED:-}" = 0 ] || [[ "${GOFLAGS:-}" == *purego_secp256k1* ]]; then
  exit 0
fi
if [ "$(id -u)" -eq 0 ] && command -v apt-get >/dev/null 2>&1; then
  echo "installing libsecp256k1 (apt-get install -y libsecp256k1-dev)..." >&2
  export DEBIAN_FRONTEND=noninteractive
  if ! apt-get install -y -qq libsecp256k1-dev >/dev/null 2>&1; then
    apt-get update -qq
    apt-get install -y -qq libsecp256k1-dev >/dev/null
  fi
  [ -f "$header" ] && exit 0
  echo "libsecp256k1-dev was installed but $header was not found" >&2
  exit 1
fi
cat >&2 <<MSG
libsecp256k1's headers ($header) are missing. Install them, then run this
command again:

    sudo apt-get update && sudo apt-get install -y libsecp256k1-dev

or use the slower pure-Go signature verifier instead:

    GOFLAGS=-tags=purego_secp256k1 scripts/run.sh
MSG
exit 1
