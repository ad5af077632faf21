#!/usr/bin/env bash
# Ensures the PostgreSQL server binaries (initdb, pg_ctl, postgres) are on
# this machine. As root it installs Debian's postgresql package; otherwise it
# prints the exact command to run and fails.
set -euo pipefail

have_pg() {
  command -v initdb >/dev/null 2>&1 && command -v pg_ctl >/dev/null 2>&1 && return 0
  compgen -G '/usr/lib/postgresql/*/bin/initdb' >/dev/null 2>&1
}

if have_pg; then
  exit 0
fi
if [ "$(id -u)" -eq 0 ] && command -v apt-get >/dev/null 2>&1; then
  echo "installing the PostgreSQL server binaries (apt-get install -y postgresql)..." >&2
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq postgresql >/dev/null
  have_pg && exit 0
  echo "postgresql was installed but initdb was not found" >&2
  exit 1
fi
cat >&2 <<'MSG'
The PostgreSQL server binaries (initdb, pg_ctl, postgres) are missing.
Install them, then run this command again:

    sudo apt-get update && sudo apt-get install -y postgresql

MSG
exit 1
