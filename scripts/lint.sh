#!/usr/bin/env bash
# The lint steps of `make lint` and of scripts/test.sh: gofmt, go vet, then
# golangci-lint at the pinned version with .golangci.yml. Any finding fails.
#
# golangci-lint is built from source through the Go module proxy on first use
# (about 2 minutes on 2 cores) and its analysis cache is kept; both live in
# the per-user cache directory ($XDG_CACHE_HOME or ~/.cache, buzz-lint/;
# BUZZ_LINT_DIR overrides it), outside the work tree, so a fresh clone (as CI
# makes) lints in seconds instead of rebuilding the tool and re-analysing
# every package (about 200 s of CPU). Without a home directory it falls back
# to the git-ignored ./.bin.
set -euo pipefail
cd "$(dirname "$0")/.."

# As in scripts/test.sh: a build cache that does not depend on the clone's
# folder, so go vet in a fresh clone reuses what earlier runs compiled.
case " ${GOFLAGS:-} " in
  *" -trimpath "*) ;;
  *) export GOFLAGS="${GOFLAGS:+$GOFLAGS }-trimpath" ;;
esac

version=2.15.0
if [ -n "${BUZZ_LINT_DIR:-}" ]; then
  dir=$BUZZ_LINT_DIR
elif [ -n "${XDG_CACHE_HOME:-}" ]; then
  dir=$XDG_CACHE_HOME/buzz-lint
elif [ -n "${HOME:-}" ]; then
  dir=$HOME/.cache/buzz-lint
else
  dir=$PWD/.bin
fi
mkdir -p "$dir"
bin=$dir/golangci-lint-v$version

if ! "$bin" version 2>/dev/null | grep -q "version $version "; then
  echo "installing golangci-lint v$version into $dir" >&2
  # Built aside and moved into place, so a concurrent run never sees half a
  # binary.
  tmpbin=$(mktemp -d "$dir/install.XXXXXX")
  GOBIN=$tmpbin go install "github.com/golangci/golangci-lint/v2/cmd/golangci-lint@v$version"
  mv -f "$tmpbin/golangci-lint" "$bin"
  rm -rf "$tmpbin"
fi

# Tracked and new (not ignored) Go files that exist in the work tree.
files=()
while IFS= read -r f; do [ -f "$f" ] && files+=("$f"); done < <(git ls-files -co --exclude-standard '*.go')
unformatted=$(gofmt -l "${files[@]}")
if [ -n "$unformatted" ]; then
  echo "gofmt: these files need formatting (gofmt -w):" >&2
  echo "$unformatted" >&2
  exit 1
fi

go vet ./...
# The libsecp256k1 verifier is behind a build tag; vet it too where it builds.
tags=$(scripts/secp256k1-tags.sh)
if [ -n "$tags" ]; then
  go vet "$tags" ./internal/event
fi

# golangci-lint's cache does not notice an edited ruleguard rules file, so the
# cache directory is named after the rules and the config. Several clones
# with different rules share the directory: a cache unused for a week goes.
key=$(cat .golangci.yml scripts/lint/rules.go | sha256sum | cut -c1-12)
export GOLANGCI_LINT_CACHE=$dir/lint-cache-$key
mkdir -p "$GOLANGCI_LINT_CACHE"
touch "$GOLANGCI_LINT_CACHE"
find "$dir" -maxdepth 1 -name 'lint-cache-*' ! -name "lint-cache-$key" -mtime +7 -exec rm -rf {} +

"$bin" run ./...
