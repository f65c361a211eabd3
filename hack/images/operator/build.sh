#!/usr/bin/env bash
# build.sh OUT REF: the operator's image, built from the project's own Dockerfile by Debian's
# buildah: no daemon, no registry. The base is the local Python (hack/images/python), given as
# the Dockerfile's BASE_IMAGE; the Python packages come from PyPI, as in any build of it.
#
# buildah runs as root with the vfs storage driver (no overlay mounts to leave behind) and chroot
# isolation (no user namespace, no cgroups; the host's network), in a storage of its own beside
# the image cache (outside the clone), deleted afterwards. The host's CA bundle is mounted over
# the base's for the RUN steps only (not part of the image): where outgoing TLS goes through a
# proxy that the host trusts, Debian's pip in the build trusts it too.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
out="${1:?usage: build.sh OUT REF}" ref="${2:?usage: build.sh OUT REF}"

read -r _ base_ref base_archive < <("$here/../build.sh" python | grep '^python ')

store="$(mktemp -d "$(dirname "$out")/buildah.XXXXXX")"
buildah_() {
  nice -n 10 buildah --storage-driver vfs --root "$store/root" --runroot "$store/run" "$@"
}
cleanup() {
  buildah_ rm --all >/dev/null 2>&1 || true
  rm -rf "$store"
}
trap cleanup EXIT

# The archive's own name for it is base_ref (localhost/...: no registry is asked).
buildah_ pull --quiet "docker-archive:$base_archive" >/dev/null
volumes=()
ca=/etc/ssl/certs/ca-certificates.crt
if [[ -s "$ca" ]]; then volumes+=(--volume "$ca:$ca:ro"); fi
# --format docker keeps HEALTHCHECK NONE (OCI has no such field); --layers=false commits each
# stage once.
buildah_ build --quiet --isolation chroot --format docker --layers=false --pull=never \
  "${volumes[@]}" --build-arg BASE_IMAGE="$base_ref" --tag "$ref" --file Dockerfile . >/dev/null
buildah_ push --quiet "$ref" "docker-archive:$out:$ref"
