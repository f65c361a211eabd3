#!/usr/bin/env bash
# build.sh OUT REF: Debian's prometheus-redis-exporter, of the upstream release 1.45.0 that the
# operator pins (docker.io/oliver006/redis_exporter:v1.45.0), as a stand-in for that image. The
# exporter binary is the entry point (the operator's pods give it `args` only); it listens on
# 9121 and writes nothing (the pods run it as their uid, 999, with a read-only root). Like the
# upstream image, it runs as nobody unless told otherwise.
# shellcheck disable=SC2016 # the hooks' "$1" is for mmdebstrap's sh to expand
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
out="${1:?usage: build.sh OUT REF}" ref="${2:?usage: build.sh OUT REF}"
# shellcheck source=hack/images/rootfs.sh
. "$here/../rootfs.sh"
layer="$out.layer.tar"
trap 'rm -f "$layer"' EXIT

# The reference names the release: the build fails should Debian's package be another.
debian_rootfs "$layer" prometheus-redis-exporter \
  --customize-hook='chroot "$1" dpkg-query -W -f "\${Version}\n" prometheus-redis-exporter | grep -q "^1.45.0-"'

pack_image "$layer" "$out" "$ref" \
  --entrypoint '["/usr/bin/prometheus-redis-exporter"]' --user 65534:65534 --port 9121/tcp
