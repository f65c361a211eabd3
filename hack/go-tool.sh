#!/usr/bin/env bash
# Builds a Go test tool from the Go module proxy into bin/, cached outside the clone like the
# control plane (hack/envtest.sh): a fresh clone on the same machine only copies it, and a second
# run is a no-op. Prints the binary's path last.
#
#   hack/go-tool.sh jaeger     Jaeger v2 all-in-one (an OTLP receiver, in-memory storage, the
#                              query HTTP API): the tracing tests, `make demo JAEGER=1`, bench
#   hack/go-tool.sh chainsaw   Chainsaw, the declarative end-to-end tests (tests/chainsaw/)
#   hack/go-tool.sh crane      crane (go-containerregistry): the pipeline scripts read and move
#                              image tags with it, and `crane registry serve` is the OCI registry
#                              their tests push to
#   hack/go-tool.sh seaweedfs  SeaweedFS's `weed` (into bin/weed): the S3-compatible object store
#                              that the backup tests upload to (tests/objectstore.py)
#
# Versions (with or without the leading v): JAEGER_VERSION, CHAINSAW_VERSION, CRANE_VERSION,
# SEAWEEDFS_VERSION; the cache: GO_TOOLS_CACHE.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/.." && pwd)"
tool="${1:?usage: hack/go-tool.sh jaeger|chainsaw|crane|seaweedfs}"

case "$tool" in
  jaeger) version="${JAEGER_VERSION:-1.75.0}" ;;
  # 0.2.15, not 0.2.12: 0.2.12's test runner does not compile with Go 1.25+ (testing.MainStart
  # grew a ModulePath method); 0.2.15 is the first release built for Go 1.26.
  chainsaw) version="${CHAINSAW_VERSION:-0.2.15}" ;;
  crane) version="${CRANE_VERSION:-0.22.1}" ;;
  # The module proxy lists no tagged version of SeaweedFS: a pseudo-version it is.
  seaweedfs) version="${SEAWEEDFS_VERSION:-v0.0.0-20261109003541-7506e5f91cd6}" binary=weed ;;
  *) echo "unknown tool: $tool (jaeger, chainsaw, crane or seaweedfs)" >&2; exit 2 ;;
esac
version="${version#v}"
binary="${binary:-$tool}"
cache="${GO_TOOLS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/database-operator/tools}/$tool-v$version"
dest="$root/bin/$binary"

log() { printf '[%s %s] %s\n' "$tool" "$(date +%H:%M:%S)" "$*" >&2; }

# go_build_module DEST MODULE@VERSION PACKAGE: for a module whose go.mod has replace directives,
# which `go install pkg@version` refuses: the module is downloaded and built as the main module,
# in a scratch copy.
go_build_module() {
  local module scratch
  module="$(go mod download -json "$2" |
    python3 -c 'import json, sys; print(json.load(sys.stdin)["Dir"])')"
  scratch="$(mktemp -d)"
  cp -r "$module/." "$scratch" && chmod -R u+w "$scratch"
  (cd "$scratch" && CGO_ENABLED=0 GOFLAGS=-mod=mod nice go build -trimpath -ldflags "-s -w" \
    -o "$1" "$3")
  rm -rf "$scratch"
}

# go_install DEST PACKAGE@VERSION: `go install` into a scratch GOBIN, then moved to DEST.
go_install() {
  local gobin
  gobin="$(mktemp -d)"
  GOBIN="$gobin" CGO_ENABLED=0 nice go install -trimpath -ldflags "-s -w" "$2"
  mv "$gobin/$(basename "${2%@*}")" "$1"
  rm -rf "$gobin"
}

build_jaeger() { go_build_module "$1" "github.com/jaegertracing/jaeger@v$version" ./cmd/jaeger; }
build_chainsaw() { go_install "$1" "github.com/kyverno/chainsaw@v$version"; }
build_crane() { go_install "$1" "github.com/google/go-containerregistry/cmd/crane@v$version"; }
build_seaweedfs() { go_build_module "$1" "github.com/seaweedfs/seaweedfs@v$version" ./weed; }

if [[ ! -x "$cache/$binary" ]]; then
  log "building $tool v$version (first run on a machine: 4 to 15 minutes on 2 cores)"
  start=$SECONDS
  mkdir -p "$cache"
  "build_$tool" "$cache/$binary.tmp"
  mv "$cache/$binary.tmp" "$cache/$binary"
  log "built $tool in $((SECONDS - start))s"
fi

mkdir -p "$(dirname "$dest")"
if ! cmp -s "$cache/$binary" "$dest"; then
  cp "$cache/$binary" "$dest.tmp" && mv "$dest.tmp" "$dest"
  log "installed $dest"
fi
echo "$dest"
