#!/usr/bin/env bash
# Builds Chainsaw (Kyverno's declarative Kubernetes end-to-end test tool, Kuttl's successor) from
# the Go module proxy into bin/chainsaw, for `make chainsaw` and the e2e tier. Cached outside the
# clone (CHAINSAW_CACHE) like the control plane: a fresh clone on the same machine only copies
# it. A second run is a no-op. Prints the binary's path last.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/.." && pwd)"
# 0.2.15, not 0.2.12: 0.2.12's test runner does not compile with Go 1.25+ (testing.MainStart
# grew a ModulePath method); 0.2.15 is the first release built for Go 1.26.
version="${CHAINSAW_VERSION:-0.2.15}"
cache="${CHAINSAW_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/database-operator/tools}/chainsaw-v$version"
dest="$root/bin/chainsaw"

log() { printf '[chainsaw %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }

if [[ ! -x "$cache/chainsaw" ]]; then
  log "building chainsaw v$version (first run on a machine: a few minutes on 2 cores)"
  start=$SECONDS
  mkdir -p "$cache"
  GOBIN="$cache" CGO_ENABLED=0 nice go install -trimpath -ldflags "-s -w" \
    "github.com/kyverno/chainsaw@v$version"
  log "built chainsaw in $((SECONDS - start))s"
fi

mkdir -p "$(dirname "$dest")"
if ! cmp -s "$cache/chainsaw" "$dest"; then
  cp "$cache/chainsaw" "$dest.tmp" && mv "$dest.tmp" "$dest"
  log "installed $dest"
fi
echo "$dest"
