#!/usr/bin/env bash
# Builds Jaeger v2 (all-in-one: an OTLP receiver, in-memory storage, the query HTTP API) from the
# Go module proxy, for the tracing tests, `make demo JAEGER=1` and `make bench`. Jaeger's go.mod
# has replace directives, so `go install pkg@version` refuses it: the module is downloaded and
# built as the main module, in a scratch copy.
#
# Cached outside the clone (JAEGER_CACHE) like the control plane (hack/envtest.sh): a fresh clone
# on the same machine only copies it. A second run is a no-op. Prints the binary's path last.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/.." && pwd)"
version="${JAEGER_VERSION:-1.75.0}"
cache="${JAEGER_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/database-operator/tools}/jaeger-v$version"
dest="$root/bin/jaeger"

log() { printf '[jaeger %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }

if [[ ! -x "$cache/jaeger" ]]; then
  log "building jaeger v$version (first run on a machine: about 6 minutes on 2 cores)"
  start=$SECONDS
  module="$(go mod download -json "github.com/jaegertracing/jaeger@v$version" |
    python3 -c 'import json, sys; print(json.load(sys.stdin)["Dir"])')"
  scratch="$(mktemp -d)"
  trap 'rm -rf "$scratch"' EXIT
  cp -r "$module/." "$scratch" && chmod -R u+w "$scratch"
  mkdir -p "$cache"
  (cd "$scratch" && CGO_ENABLED=0 GOFLAGS=-mod=mod nice go build -trimpath -ldflags "-s -w" \
    -o "$cache/jaeger.tmp" ./cmd/jaeger)
  mv "$cache/jaeger.tmp" "$cache/jaeger"
  log "built jaeger in $((SECONDS - start))s"
fi

mkdir -p "$(dirname "$dest")"
if ! cmp -s "$cache/jaeger" "$dest"; then
  cp "$cache/jaeger" "$dest.tmp" && mv "$dest.tmp" "$dest"
  log "installed $dest"
fi
echo "$dest"
