#!/usr/bin/env bash
# Builds a Go test tool from the Go module proxy into bin/, cached outside the clone like the
# control plane (hack/envtest.sh): a fresh clone on the same machine only copies it, and a second
# run is a no-op. Prints the binary's path last.
#
#   hack/go-tool.sh jaeger     Jaeger v2 all-in-one (an OTLP receiver, in-memory storage, the
#                              query HTTP API): the tracing tests, `make demo JAEGER=1`, bench
#   hack/go-tool.sh chainsaw   Chainsaw, the declarative end-to-end tests (tests/chainsaw/)
#
# Versions: JAEGER_VERSION, CHAINSAW_VERSION; the cache: GO_TOOLS_CACHE.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/.." && pwd)"
tool="${1:?usage: hack/go-tool.sh jaeger|chainsaw}"

case "$tool" in
  jaeger) version="${JAEGER_VERSION:-1.75.0}" ;;
  # 0.2.15, not 0.2.12: 0.2.12's test runner does not compile with Go 1.25+ (testing.MainStart
  # grew a ModulePath method); 0.2.15 is the first release built for Go 1.26.
  chainsaw) version="${CHAINSAW_VERSION:-0.2.15}" ;;
  *) echo "unknown tool: $tool (jaeger or chainsaw)" >&2; exit 2 ;;
esac
cache="${GO_TOOLS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/database-operator/tools}/$tool-v$version"
dest="$root/bin/$tool"

log() { printf '[%s %s] %s\n' "$tool" "$(date +%H:%M:%S)" "$*" >&2; }

build_jaeger() {
  # Jaeger's go.mod has replace directives, so `go install pkg@version` refuses it: the module is
  # downloaded and built as the main module, in a scratch copy.
  local module scratch
  module="$(go mod download -json "github.com/jaegertracing/jaeger@v$version" |
    python3 -c 'import json, sys; print(json.load(sys.stdin)["Dir"])')"
  scratch="$(mktemp -d)"
  trap 'rm -rf "$scratch"' EXIT
  cp -r "$module/." "$scratch" && chmod -R u+w "$scratch"
  (cd "$scratch" && CGO_ENABLED=0 GOFLAGS=-mod=mod nice go build -trimpath -ldflags "-s -w" \
    -o "$1" ./cmd/jaeger)
}

build_chainsaw() {
  local gobin
  gobin="$(mktemp -d)"
  trap 'rm -rf "$gobin"' EXIT
  GOBIN="$gobin" CGO_ENABLED=0 nice go install -trimpath -ldflags "-s -w" \
    "github.com/kyverno/chainsaw@v$version"
  mv "$gobin/chainsaw" "$1"
}

if [[ ! -x "$cache/$tool" ]]; then
  log "building $tool v$version (first run on a machine: 4 to 15 minutes on 2 cores)"
  start=$SECONDS
  mkdir -p "$cache"
  "build_$tool" "$cache/$tool.tmp"
  mv "$cache/$tool.tmp" "$cache/$tool"
  log "built $tool in $((SECONDS - start))s"
fi

mkdir -p "$(dirname "$dest")"
if ! cmp -s "$cache/$tool" "$dest"; then
  cp "$cache/$tool" "$dest.tmp" && mv "$dest.tmp" "$dest"
  log "installed $dest"
fi
echo "$dest"
