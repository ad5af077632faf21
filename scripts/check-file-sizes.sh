#!/usr/bin/env bash
# Fails when a file tracked by git is larger than 1 MiB (1,048,576 bytes),
# naming each one with its size: compiled binaries, datasets and profiles
# stay out of the repository (build them, or generate them at run time).
#
#   scripts/check-file-sizes.sh          # the repository this script is in
#   scripts/check-file-sizes.sh DIR      # the git work tree at DIR
#
# The size is the work tree's; a tracked file missing from it is skipped.
set -euo pipefail
dir=${1:-$(dirname "$0")/..}
cd "$dir"
limit=$((1024 * 1024))
big=()
while IFS=$'\t' read -r size f; do
  if [ "$size" -gt "$limit" ]; then
    big+=("$f ($size bytes)")
  fi
done < <(git ls-files -z | xargs -0 -r stat -c $'%s\t%n' -- 2>/dev/null || true)
if [ ${#big[@]} -gt 0 ]; then
  echo "check-file-sizes: tracked files over 1 MiB ($limit bytes); keep compiled files and data out of git:" >&2
  printf '  %s\n' "${big[@]}" >&2
  exit 1
fi
