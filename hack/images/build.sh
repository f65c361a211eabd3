#!/usr/bin/env bash
# Builds the real-node tier's container images without a registry or a daemon, each from a
# folder of its own, and caches them outside the clone like the other tools (hack/envtest.sh):
#
#   hack/images/build.sh NAME...     (or `all`)
#
# hack/images/NAME/ holds:
#   ref        one line: the image's reference, named for what it is (localhost/debian/...)
#   build.sh   `build.sh OUT REF`: writes an image archive (docker-archive, see mkimage.py) at OUT
#   inputs     optional: more paths of the checkout (files or folders) the image is made from
#
# An image is rebuilt only when its folder, its inputs or the shared helpers here change: the
# cache key is a digest of their contents. Prints "NAME REF ARCHIVE" for each, last.
# The cache: IMAGES_CACHE (default ~/.cache/database-operator/images).
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
cache="${IMAGES_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/database-operator/images}"

log() { printf '[images %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }

names=("$@")
if [[ ${#names[@]} -eq 0 ]]; then
  echo "usage: hack/images/build.sh NAME... | all" >&2; exit 2
fi
if [[ "${names[0]}" == all ]]; then
  names=()
  for dir in "$here"/*/; do [[ -f "$dir/ref" ]] && names+=("$(basename "$dir")"); done
fi

# key NAME: a digest of every file the image is made from (names and contents).
key() {
  local name="$1" paths=("$here/$1" "$here/mkimage.py")
  local shared
  for shared in "$here"/*.sh; do [[ "$shared" == "$here/build.sh" ]] || paths+=("$shared"); done
  if [[ -f "$here/$name/inputs" ]]; then
    local input
    while read -r input; do
      [[ -z "$input" || "$input" == \#* ]] || paths+=("$root/$input")
    done <"$here/$name/inputs"
  fi
  # Left out: what Python and pip write beside the sources (never part of an image: see
  # .dockerignore), so installing or testing the checkout rebuilds nothing.
  find "${paths[@]}" -type f -not -name '*.pyc' -not -path '*/__pycache__/*' \
    -not -path '*.egg-info/*' -print0 |
    LC_ALL=C sort -z | xargs -0 sha256sum | sed "s|  $root/|  |" | sha256sum | cut -c1-16
}

mkdir -p "$cache"
results=()
for name in "${names[@]}"; do
  [[ -f "$here/$name/ref" && -x "$here/$name/build.sh" ]] || {
    echo "no image '$name' (hack/images/$name/ref and build.sh)" >&2; exit 2; }
  ref="$(head -n 1 "$here/$name/ref")"
  archive="$cache/$name-$(key "$name").tar"
  # One build of an image at a time: another run asking for it waits, then finds it built.
  exec {lock}>"$cache/$name.lock"
  flock "$lock"
  if [[ ! -s "$archive" ]]; then
    log "building $name ($ref)"
    start=$SECONDS
    (cd "$root" && "$here/$name/build.sh" "$archive.tmp" "$ref")
    mv "$archive.tmp" "$archive"
    log "built $name in $((SECONDS - start))s: $(du -h "$archive" | cut -f1)"
    # Older builds of the same image are dropped (NAME-<16 hex digits>.tar: not redis-exporter's
    # archives when redis is built).
    find "$cache" -maxdepth 1 -regextype posix-extended \
      -regex ".*/$name-[0-9a-f]{16}\.tar" -not -path "$archive" -delete
  fi
  exec {lock}>&-
  results+=("$name $ref $archive")
done
printf '%s\n' "${results[@]}"
