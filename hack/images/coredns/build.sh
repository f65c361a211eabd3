#!/usr/bin/env bash
# build.sh OUT REF: the real-node tier's cluster DNS image, the static CoreDNS binary alone,
# built from the Go module proxy with the pinned build module hack/envtest/coredns (REF's tag
# must be that version). The Corefile comes from a ConfigMap (tests/realnode.py).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
module="$here/../../envtest/coredns"
out="${1:?usage: build.sh OUT REF}" ref="${2:?usage: build.sh OUT REF}"
version="$(sed -nE 's|^[[:space:]]*(require[[:space:]]+)?github.com/coredns/coredns v([^ ]+).*$|\2|p' "$module/go.mod")"
if [[ "${ref##*:}" != "$version" ]]; then
  echo "hack/images/coredns/ref ($ref) does not match the built version $version" >&2
  exit 1
fi
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

mkdir "$work/rootfs"
(cd "$module" && CGO_ENABLED=0 go build -trimpath \
  -ldflags "-s -w -X github.com/coredns/coredns/coremain.GitCommit=v$version" \
  -o "$work/rootfs/coredns" github.com/coredns/coredns)
tar --create --file "$work/layer.tar" --directory "$work/rootfs" \
  --sort=name --numeric-owner --owner=0 --group=0 --mtime=@0 coredns
# 65532: the upstream image's nonroot user. The Corefile listens on 1053, so no capability is
# needed; the Service maps 53 to it.
python3 "$here/../mkimage.py" --layer "$work/layer.tar" --ref "$ref" --out "$out" \
  --entrypoint '["/coredns"]' --user 65532:65532 --port 1053/udp --port 1053/tcp
