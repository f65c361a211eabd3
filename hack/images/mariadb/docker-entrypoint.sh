#!/bin/sh
# The entry point of localhost/debian/mariadb: the contract the official mysql and mariadb images
# document, written anew for Debian's MariaDB, which stands in for MySQL.
#
#   - Options first (`--max_connections=200`...) are the server's: `mariadbd` is put before them.
#   - `mariadbd ...` (or `mysqld ...`) on a data directory without the `mysql` schema:
#     mariadb-install-db, then a temporary server on the socket only (no TCP) sets
#     MYSQL_ROOT_PASSWORD for root@localhost and root@MYSQL_ROOT_HOST (default '%'), creates
#     MYSQL_DATABASE and MYSQL_USER (with MYSQL_PASSWORD and every right on MYSQL_DATABASE), and
#     runs /docker-entrypoint-initdb.d/*: *.sql and *.sql.gz with the client as root, *.sh run
#     when executable and sourced otherwise (they see $SOCKET, the temporary server's socket).
#     The MARIADB_* spellings win over the MYSQL_* ones. MYSQL_ALLOW_EMPTY_PASSWORD (any value)
#     allows an empty root password. Then the server itself is exec-ed with the arguments.
#   - Started as root: the data directory and the socket's directory are given to mysql (999),
#     which the script then runs as (setpriv).
#   - Anything else is exec-ed as given.
# No password ever reaches a command line: SQL goes in on stdin, the clients read MYSQL_PWD.
set -e

case "${1:-}" in
  -*) set -- mariadbd "$@" ;;
esac

wants_data=false
case "${1:-}" in
  mariadbd | mysqld)
    wants_data=true
    for arg; do
      case "$arg" in
        '-?' | --help | --print-defaults | -V | --version) wants_data=false ;;
      esac
    done
    ;;
esac
if [ "$wants_data" = false ]; then
  exec "$@"
fi

# server_setting NAME SERVER ARGS...: a setting of the server as its arguments and option files
# make it (the table of values at the end of --help: the name at the start of a line).
server_setting() {
  name="$1"
  shift
  "$@" --verbose --help 2>/dev/null | awk -v name="$name" 'index($0, name " ") == 1 { print $2; exit }'
}
DATADIR="$(server_setting datadir "$@")"
SOCKET="$(server_setting socket "$@")"
if [ -z "$DATADIR" ] || [ -z "$SOCKET" ]; then
  echo "docker-entrypoint.sh: cannot read the server's datadir and socket (bad arguments?)" >&2
  "$@" --verbose --help >/dev/null
  exit 1
fi

if [ "$(id -u)" = 0 ]; then
  mkdir -p "$DATADIR" "$(dirname "$SOCKET")"
  find "$DATADIR" "$(dirname "$SOCKET")" ! -user mysql -exec chown mysql:mysql '{}' +
  exec setpriv --reuid=mysql --regid=mysql --init-groups -- "$0" "$@"
fi

# The text of a quoted SQL string ('...') and of a quoted identifier (`...`).
sql_string() { printf '%s' "$1" | sed -e 's/\\/\\\\/g' -e "s/'/\\\\'/g"; }
# shellcheck disable=SC2016 # backquotes for sed, not a command
sql_name() { printf '%s' "$1" | sed -e 's/`/``/g'; }

# The client as root on the temporary server, SQL on stdin; root's password is none until the
# set-up gives it one.
root_password_now=
process_sql() {
  MYSQL_PWD="$root_password_now" mariadb --protocol=socket --socket="$SOCKET" --user=root \
    --no-auto-rehash "$@"
}
# The same in MYSQL_DATABASE, when there is one.
process_sql_in_database() {
  if [ -n "$DATABASE" ]; then process_sql --database="$DATABASE"; else process_sql; fi
}

if [ ! -d "$DATADIR/mysql" ]; then
  ROOT_PASSWORD="${MARIADB_ROOT_PASSWORD:-${MYSQL_ROOT_PASSWORD:-}}"
  ROOT_HOST="${MARIADB_ROOT_HOST:-${MYSQL_ROOT_HOST:-%}}"
  ALLOW_EMPTY="${MARIADB_ALLOW_EMPTY_ROOT_PASSWORD:-${MYSQL_ALLOW_EMPTY_PASSWORD:-}}"
  DATABASE="${MARIADB_DATABASE:-${MYSQL_DATABASE:-}}"
  USER_NAME="${MARIADB_USER:-${MYSQL_USER:-}}"
  USER_PASSWORD="${MARIADB_PASSWORD:-${MYSQL_PASSWORD:-}}"
  if [ -z "$ROOT_PASSWORD" ] && [ -z "$ALLOW_EMPTY" ]; then
    echo "docker-entrypoint.sh: the database is uninitialised and MYSQL_ROOT_PASSWORD is not set" >&2
    exit 1
  fi
  if [ -n "$USER_NAME" ] && { [ -z "$USER_PASSWORD" ] || [ "$USER_NAME" = root ]; }; then
    echo "docker-entrypoint.sh: MYSQL_USER needs MYSQL_PASSWORD, and cannot be root" >&2
    exit 1
  fi

  echo "docker-entrypoint.sh: initialising $DATADIR"
  shift
  # --force: no look-up of the host's name (a container may have no /etc/hosts to find it in).
  mariadb-install-db --datadir="$DATADIR" --auth-root-authentication-method=normal \
    --skip-test-db --skip-name-resolve --force "$@"

  # The temporary server: the container's arguments, then no TCP and the socket found above.
  mariadbd "$@" --skip-networking --socket="$SOCKET" &
  server=$!
  set -- mariadbd "$@"
  # root has no password yet, and only this socket reaches it.
  until echo 'SELECT 1' | process_sql >/dev/null 2>&1; do
    if ! kill -0 "$server" 2>/dev/null; then
      echo "docker-entrypoint.sh: the temporary server did not start" >&2
      exit 1
    fi
    sleep 0.2
  done

  {
    # printf, not echo: sh's echo would read the backslashes.
    line() { printf '%s\n' "$@"; }
    line "SET @@SESSION.SQL_LOG_BIN = 0;"
    # Only the accounts made here: not those mariadb-install-db makes for the host's name.
    line "DROP USER IF EXISTS 'root'@'127.0.0.1', 'root'@'::1', ''@'localhost';"
    line "EXECUTE IMMEDIATE CONCAT('DROP USER IF EXISTS \\'root\\'@\\'', @@hostname, '\\'');"
    line "EXECUTE IMMEDIATE CONCAT('DROP USER IF EXISTS \\'\\'@\\'', @@hostname, '\\'');"
    line "ALTER USER 'root'@'localhost' IDENTIFIED BY '$(sql_string "$ROOT_PASSWORD")';"
    if [ "$ROOT_HOST" != localhost ]; then
      line "CREATE USER 'root'@'$(sql_string "$ROOT_HOST")' IDENTIFIED BY '$(sql_string "$ROOT_PASSWORD")';"
      line "GRANT ALL ON *.* TO 'root'@'$(sql_string "$ROOT_HOST")' WITH GRANT OPTION;"
    fi
    if [ -n "$DATABASE" ]; then
      line "CREATE DATABASE IF NOT EXISTS \`$(sql_name "$DATABASE")\`;"
    fi
    if [ -n "$USER_NAME" ]; then
      line "CREATE USER '$(sql_string "$USER_NAME")'@'%' IDENTIFIED BY '$(sql_string "$USER_PASSWORD")';"
      if [ -n "$DATABASE" ]; then
        line "GRANT ALL ON \`$(sql_name "$DATABASE")\`.* TO '$(sql_string "$USER_NAME")'@'%';"
      fi
    fi
  } | process_sql
  root_password_now="$ROOT_PASSWORD"

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
        process_sql_in_database <"$file"
        ;;
      *.sql.gz)
        echo "docker-entrypoint.sh: running $file"
        gzip -dc "$file" | process_sql_in_database
        ;;
      */\*) ;;
      *) echo "docker-entrypoint.sh: ignoring $file" ;;
    esac
  done

  MYSQL_PWD="$root_password_now" mariadb-admin --socket="$SOCKET" --user=root shutdown
  wait "$server" || true
  echo "docker-entrypoint.sh: MariaDB init process complete; ready for start up."
fi

exec "$@"
