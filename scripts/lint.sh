#!/usr/bin/env bash
# The lint steps of `make lint` and of scripts/test.sh: gofmt, go vet, then
# golangci-lint at the pinned version with .golangci.yml. Any finding fails.
#
# golangci-lint is built from source through the Go module proxy into the
# git-ignored ./.bin on first use (about 2 minutes) and reused while its
# version matches.
set -euo pipefail
cd "$(dirname "$0")/.."

version=2.15.0
bin=$PWD/.bin/golangci-lint

if ! "$bin" version 2>/dev/null | grep -q "version $version "; then
  echo "installing golangci-lint v$version into .bin/" >&2
  GOBIN=$PWD/.bin go install "github.com/golangci/golangci-lint/v2/cmd/golangci-lint@v$version"
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
# cache directory is named after the rules and the config.
key=$(cat .golangci.yml scripts/lint/rules.go | sha256sum | cut -c1-12)
export GOLANGCI_LINT_CACHE=$PWD/.bin/lint-cache-$key
find .bin -maxdepth 1 -name 'lint-cache-*' ! -name "lint-cache-$key" -exec rm -rf {} +

"$bin" run ./...
