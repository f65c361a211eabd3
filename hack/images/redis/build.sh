#!/usr/bin/env bash
# build.sh OUT REF: Debian's Redis 7.0 (redis-server and redis-tools) as a stand-in for the
# official redis image: its entry point (docker-entrypoint.sh here), its uid 999, /data as the
# working directory, its image config. Debian's /etc/redis/redis.conf stays, unused (the server
# runs on its built-in defaults, as in the official image).
# shellcheck disable=SC2016 # the hooks' "$1" is for mmdebstrap's sh to expand
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
out="${1:?usage: build.sh OUT REF}" ref="${2:?usage: build.sh OUT REF}"
# shellcheck source=hack/images/rootfs.sh
. "$here/../rootfs.sh"
layer="$out.layer.tar"
trap 'rm -f "$layer"' EXIT

debian_rootfs "$layer" redis-server,redis-tools \
  "$(service_user redis 999 /var/lib/redis '' /usr/sbin/nologin)" \
  --customize-hook="copy-in $here/docker-entrypoint.sh /usr/local/bin" \
  --customize-hook='install -d -o 999 -g 999 -m 0755 "$1"/data'

pack_image "$layer" "$out" "$ref" \
  --entrypoint '["docker-entrypoint.sh"]' --cmd '["redis-server"]' --workdir /data \
  --port 6379/tcp
