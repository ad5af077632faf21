#!/usr/bin/env bash
# Ensures redis-server is on this machine for the scale-out tests, which
# start throwaway Redis processes of their own (the relay itself needs Redis
# only with REDIS_URL). As root it installs Debian's redis-server package;
# otherwise it prints the exact command to run and fails.
set -euo pipefail

if command -v redis-server >/dev/null 2>&1; then
  exit 0
fi
if [ "$(id -u)" -eq 0 ] && command -v apt-get >/dev/null 2>&1; then
  echo "installing redis-server (apt-get install -y redis-server)..." >&2
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq redis-server >/dev/null
  command -v redis-server >/dev/null 2>&1 && exit 0
  echo "redis-server was installed but is not on PATH" >&2
  exit 1
fi
cat >&2 <<'MSG'
redis-server is missing; the scale-out tests start throwaway Redis processes.
Install it, then run this command again:

    sudo apt-get update && sudo apt-get install -y redis-server

MSG
exit 1
