#!/usr/bin/env bash
# Makes sure the database engines' own programs are here, from Debian's packages: the replication
# recipe tests start a real PostgreSQL primary and replica (initdb, postgres, pg_basebackup,
# psql) and a real Redis primary and replica (redis-server, redis-cli) on loopback.
set -euo pipefail
here="$(dirname "$0")"
# PostgreSQL's server programs live in /usr/lib/postgresql/<version>/bin; psql and
# pg_basebackup are on PATH through postgresql-common's wrapper.
"$here/apt-install.sh" postgresql '/usr/lib/postgresql/*/bin/postgres' psql pg_basebackup
"$here/apt-install.sh" redis-server redis-server redis-cli
