#!/usr/bin/env bash
# build.sh OUT REF: Debian's MariaDB 10.11 (mariadb-server and mariadb-client) as a stand-in for
# the official mysql image: its entry point (docker-entrypoint.sh here), its uid 999, its
# directories, its image config. Like the official images, it listens on every address (Debian's
# bind-address = 127.0.0.1 is commented out; MySQL 8's own default is every address) and never
# resolves a client's name (docker.cnf). Debian's install-time data directory is dropped: the
# entry point makes one.
# shellcheck disable=SC2016 # the hooks' "$1" is for mmdebstrap's sh to expand
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
out="${1:?usage: build.sh OUT REF}" ref="${2:?usage: build.sh OUT REF}"
# shellcheck source=hack/images/rootfs.sh
. "$here/../rootfs.sh"
layer="$out.layer.tar"
trap 'rm -f "$layer"' EXIT

debian_rootfs "$layer" mariadb-server,mariadb-client \
  "$(service_user mysql 999 /nonexistent 'MySQL Server,,,' /bin/false)" \
  --customize-hook="copy-in $here/docker-entrypoint.sh /usr/local/bin" \
  --customize-hook="copy-in $here/docker.cnf /etc/mysql/conf.d" \
  --customize-hook='sed -i -E "s/^(bind-address)/#\1/" "$1"/etc/mysql/mariadb.conf.d/50-server.cnf' \
  --customize-hook='! grep -rqsE "^bind-address" "$1"/etc/mysql' \
  --customize-hook='rm -rf "$1"/var/lib/mysql && install -d -o 999 -g 999 -m 1777 "$1"/var/lib/mysql "$1"/run/mysqld' \
  --customize-hook='install -d -m 0755 "$1"/docker-entrypoint-initdb.d'

pack_image "$layer" "$out" "$ref" \
  --entrypoint '["docker-entrypoint.sh"]' --cmd '["mariadbd"]' --env LANG=C.UTF-8 \
  --port 3306/tcp
