#!/usr/bin/env bash
# build.sh OUT REF: Debian's PostgreSQL 15 (postgresql-15) as a stand-in for the official
# postgres image: its entry point (docker-entrypoint.sh here), its uid 999, its directories, its
# image config (PATH with the server's bin, PGDATA, LANG, port, stop signal). No cluster is made
# at install (the entry point makes one in $PGDATA), and the LLVM JIT libraries are left out
# (150 MiB; without them PostgreSQL simply runs without JIT).
# shellcheck disable=SC2016 # the hooks' "$1" is for mmdebstrap's sh to expand
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
out="${1:?usage: build.sh OUT REF}" ref="${2:?usage: build.sh OUT REF}"
# shellcheck source=hack/images/rootfs.sh
. "$here/../rootfs.sh"
layer="$out.layer.tar"
trap 'rm -f "$layer"' EXIT

debian_rootfs "$layer" postgresql-15 \
  "$(service_user postgres 999 /var/lib/postgresql 'PostgreSQL administrator,,,' /bin/bash)" \
  --essential-hook='mkdir -p "$1"/etc/postgresql-common/createcluster.d && echo "create_main_cluster = false" > "$1"/etc/postgresql-common/createcluster.d/image.conf' \
  --dpkgopt='path-exclude=/usr/lib/postgresql/15/lib/llvmjit*' \
  --dpkgopt='path-exclude=/usr/lib/postgresql/15/lib/bitcode/*' \
  --dpkgopt='path-exclude=/usr/lib/*/libLLVM-14.so*' \
  --dpkgopt='path-exclude=/usr/lib/*/libz3.so*' \
  --customize-hook="copy-in $here/docker-entrypoint.sh /usr/local/bin" \
  --customize-hook='install -d -o 999 -g 999 -m 3777 "$1"/run/postgresql' \
  --customize-hook='install -d -o 999 -g 999 -m 1777 "$1"/var/lib/postgresql/data' \
  --customize-hook='install -d -m 0755 "$1"/docker-entrypoint-initdb.d'

pack_image "$layer" "$out" "$ref" \
  --entrypoint '["docker-entrypoint.sh"]' --cmd '["postgres"]' \
  --env PATH=/usr/lib/postgresql/15/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
  --env LANG=C.UTF-8 --env PG_MAJOR=15 --env PGDATA=/var/lib/postgresql/data \
  --port 5432/tcp --stopsignal SIGINT
