#!/usr/bin/env bash
# build.sh OUT REF: the pods' sandbox image, a static pause (main.go here) alone, as the
# sandbox_image of the real-node tier's containerd (no registry: nothing is pulled).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
out="${1:?usage: build.sh OUT REF}" ref="${2:?usage: build.sh OUT REF}"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

mkdir "$work/rootfs"
(cd "$here" && CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o "$work/rootfs/pause" .)
tar --create --file "$work/layer.tar" --directory "$work/rootfs" \
  --sort=name --numeric-owner --owner=0 --group=0 --mtime=@0 pause
# 65535: the user the upstream pause image runs as.
python3 "$here/../mkimage.py" --layer "$work/layer.tar" --ref "$ref" --out "$out" \
  --entrypoint '["/pause"]' --user 65535:65535
