#!/usr/bin/env bash
# Prints the go build flag that selects libsecp256k1 for Schnorr
# verification, -tags=libsecp256k1, when this machine can build with it, and
# nothing otherwise (the default build uses the pure-Go verifier and needs no
# C library). "Can build with it" means what cgo will need: cgo is not off
# (CGO_ENABLED), a C compiler ($CC, else cc) is installed, and a test program
# that includes secp256k1_schnorrsig.h and uses its verify and sign32
# functions (release 0.2.0 on) links with -lsecp256k1 (Debian
# libsecp256k1-dev). Used by scripts/run.sh, the bench and soak scripts and
# the Makefile:
#
#   go build $(scripts/secp256k1-tags.sh) -o bin/ ./cmd/buzz-relay
#
# BUZZ_SECP256K1=0 prints nothing (force the pure-Go verifier); =1 prints the
# flag without checking (a build on a machine without the library then fails
# in cgo, which is what asking for it should do).
set -euo pipefail

case ${BUZZ_SECP256K1:-auto} in
0) exit 0 ;;
1) echo "-tags=libsecp256k1" && exit 0 ;;
auto) ;;
*)
  echo "secp256k1-tags.sh: BUZZ_SECP256K1 is 0, 1 or unset, got \"$BUZZ_SECP256K1\"" >&2
  exit 2
  ;;
esac

[ "$(go env CGO_ENABLED 2>/dev/null || echo 0)" = 1 ] || exit 0
cc=${CC:-cc}
command -v "$cc" >/dev/null 2>&1 || exit 0
dir=$(mktemp -d /tmp/buzz-secp256k1.XXXXXX)
trap 'rm -rf "$dir"' EXIT
cat >"$dir/probe.c" <<'C'
#include <secp256k1.h>
#include <secp256k1_extrakeys.h>
#include <secp256k1_schnorrsig.h>
int main(void) {
  return secp256k1_schnorrsig_verify == 0 || secp256k1_schnorrsig_sign32 == 0 ||
    secp256k1_keypair_create == 0;
}
C
if "$cc" -o "$dir/probe" "$dir/probe.c" -lsecp256k1 >/dev/null 2>&1; then
  echo "-tags=libsecp256k1"
fi
