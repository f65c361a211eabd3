#!/bin/sh
# The entry point of localhost/debian/postgresql: the contract the official postgres image
# documents, written anew for Debian's PostgreSQL, and nothing it does without saying so.
#
#   - Options first (`-c name=value`...) are the server's: `postgres` is put before them.
#   - `postgres ...` on an empty $PGDATA: initdb as POSTGRES_USER (default postgres) with
#     POSTGRES_PASSWORD (required), POSTGRES_INITDB_ARGS (optional, split at blanks), and
#     `host all all all scram-sha-256` in pg_hba.conf; initdb's own lines are its defaults, as
#     in the official image: the local socket and the loopback addresses `trust` every role
#     (the operator passes --auth-host=scram-sha-256 in POSTGRES_INITDB_ARGS). Then a
#     temporary server on the socket only creates POSTGRES_DB (default POSTGRES_USER) and runs
#     /docker-entrypoint-initdb.d/*: *.sql and *.sql.gz with psql, *.sh run when executable and
#     sourced otherwise. Then the server itself is exec-ed with the arguments as given.
#   - A $PGDATA that holds PG_VERSION is used as it is: no initialisation, no chmod, no chown.
#   - Started as root: $PGDATA and /run/postgresql are given to postgres (999), which the script
#     then runs as (setpriv).
#   - Anything else is exec-ed as given.
# No password ever reaches a command line: initdb reads it from stdin.
set -e

case "${1:-}" in
  -*) set -- postgres "$@" ;;
esac

# A server asked only to tell something (help, version, a setting) needs no data directory.
wants_data=false
if [ "${1:-}" = postgres ]; then
  wants_data=true
  for arg; do
    case "$arg" in
      '-?' | --help | -V | --version | --describe-config | -C) wants_data=false ;;
    esac
  done
fi
if [ "$wants_data" = false ]; then
  exec "$@"
fi

: "${PGDATA:?PGDATA is not set}"

if [ "$(id -u)" = 0 ]; then
  mkdir -p "$PGDATA" /run/postgresql
  find "$PGDATA" /run/postgresql ! -user postgres -exec chown postgres:postgres '{}' +
  exec setpriv --reuid=postgres --regid=postgres --init-groups -- "$0" "$@"
fi

# psql against the temporary server (on its socket, where the user is trusted).
process_sql() {
  PGHOST='' PGHOSTADDR='' psql -v ON_ERROR_STOP=1 -X -q --username "$POSTGRES_USER" --no-password "$@"
}

if [ ! -s "$PGDATA/PG_VERSION" ]; then
  if [ -z "${POSTGRES_PASSWORD:-}" ]; then
    echo "docker-entrypoint.sh: the database is uninitialised and POSTGRES_PASSWORD is not set" >&2
    exit 1
  fi
  export POSTGRES_USER="${POSTGRES_USER:-postgres}"
  export POSTGRES_DB="${POSTGRES_DB:-$POSTGRES_USER}"

  # POSTGRES_INITDB_ARGS is a list of options: split at blanks, never globbed.
  set -f
  # shellcheck disable=SC2086
  printf '%s\n' "$POSTGRES_PASSWORD" | initdb --username="$POSTGRES_USER" --pwfile=/dev/stdin \
    ${POSTGRES_INITDB_ARGS:-}
  set +f
  printf '\nhost all all all scram-sha-256\n' >>"$PGDATA/pg_hba.conf"

  # The temporary server: the container's arguments, then no TCP at all (the last -c wins).
  shift
  postgres "$@" -c listen_addresses= &
  server=$!
  until PGHOST='' PGHOSTADDR='' pg_isready -q --username "$POSTGRES_USER" --dbname postgres; do
    if ! kill -0 "$server" 2>/dev/null; then
      echo "docker-entrypoint.sh: the temporary server did not start" >&2
      exit 1
    fi
    sleep 0.2
  done
  set -- postgres "$@"

  if [ "$POSTGRES_DB" != postgres ]; then
    process_sql --dbname postgres --set db="$POSTGRES_DB" <<'SQL'
CREATE DATABASE :"db";
SQL
  fi

  for file in /docker-entrypoint-initdb.d/*; do
    case "$file" in
      *.sh)
        if [ -x "$file" ]; then
          echo "docker-entrypoint.sh: running $file"
          "$file"
        else
          echo "docker-entrypoint.sh: sourcing $file"
          # shellcheck disable=SC1090
          . "$file"
        fi
        ;;
      *.sql)
        echo "docker-entrypoint.sh: running $file"
        process_sql --dbname "$POSTGRES_DB" -f "$file"
        ;;
      *.sql.gz)
        echo "docker-entrypoint.sh: running $file"
        gzip -dc "$file" | process_sql --dbname "$POSTGRES_DB"
        ;;
      */\*) ;;
      *) echo "docker-entrypoint.sh: ignoring $file" ;;
    esac
  done

  pg_ctl -D "$PGDATA" -m fast -w stop
  wait "$server" || true
  echo "docker-entrypoint.sh: PostgreSQL init process complete; ready for start up."
fi

exec "$@"
