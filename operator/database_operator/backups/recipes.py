"""How each engine is backed up and restored with its own tools: the shell scripts the Jobs run in
the engine's image, in one place.

The Job builders (jobs.py) and the recipe tests (tests/integration/test_backup_recipes.py, which
run Debian's own PostgreSQL, MariaDB and Redis on loopback and a real S3 store) take them from
here, so what is tested is what the pods run. Secrets reach the scripts only through the
environment (the pods' secretKeyRefs), never through these strings or a command line.

**Dump** (the backup Job's ``dump`` container, against the Database's read-write Service): one
consistent snapshot, written to ``$BACKUP_DIR/dump.partial`` and renamed to
``$BACKUP_DIR/<file>`` only once complete, with the server's version in
``$BACKUP_DIR/engine-version``:

- PostgreSQL: ``pg_dump --format=custom`` of the Database's database, which reads everything in
  one transaction (one snapshot) and compresses;
- MySQL: ``mysqldump --single-transaction`` (one InnoDB snapshot, no locks held), gzipped;
- Redis: ``redis-cli --rdb``: the server writes one RDB snapshot and sends it.

**Restore** (the restore Job's ``restore`` container, on the new Database's volume, after the
agent fetched and verified the file into ``$RESTORE_FILE``): only onto an empty data directory
(never over data: a volume handed over by a user, or a restore that failed half-way).

- PostgreSQL and MySQL: the image's own entrypoint initialises the data directory exactly as on
  a first start (users, passwords, the database) and runs the scripts in
  ``/docker-entrypoint-initdb.d`` against its temporary, socket-only server; the restore
  container puts ``LOADER`` there, which loads the dump, stops that server and ends the
  container — so the Database's first pod finds its data initialised, and restored;
- Redis: the engine checks the RDB file (``redis-check-rdb``) and it is put in the data
  directory, where the server loads it when it starts.
"""

from __future__ import annotations

from dataclasses import dataclass

from database_operator.engines import Engine

#: Where the scripts write and read (the Jobs' emptyDir volumes).
BACKUP_DIR = "/backup"
RESTORE_DIR = "/restore"
INITDB_DIR = "/docker-entrypoint-initdb.d"
#: The dump's name while it is being written.
PARTIAL = "dump.partial"
VERSION_FILE = "engine-version"
#: An exit status a retry cannot change (the data directory is not empty): the Job fails at once.
PERMANENT_EXIT = 3

#: What the file of each engine's backup is called (and its key ends with).
EXTENSIONS = {Engine.POSTGRES: "pgdump", Engine.MYSQL: "sql.gz", Engine.REDIS: "rdb"}


def file_name(engine: Engine) -> str:
    """The dump's file name: ``backup.<ext>``."""
    return f"backup.{EXTENSIONS[engine]}"


# The password goes into a client option file of this pod's own (mode 600), never onto a
# command line; inside double quotes the client unescapes \\ and \".
_MYSQL_OPTION_FILE = """\
umask 077
cnf="$(mktemp)"
trap 'rm -f "$cnf"' EXIT
printf '[client]\\nuser=root\\npassword="%s"\\n' \
  "$(printf '%s' "$MYSQL_ROOT_PASSWORD" | sed 's/[\\\\"]/\\\\&/g')" > "$cnf"
"""

_DUMP = {
    Engine.POSTGRES: """\
set -eu
export PGPASSWORD="$POSTGRES_PASSWORD" PGCONNECT_TIMEOUT=30
psql -X -A -t -h "$DB_HOST" -p "$DB_PORT" -U "$POSTGRES_USER" -d "$POSTGRES_USER" \\
  -c 'SHOW server_version' > "$BACKUP_DIR/engine-version"
pg_dump --format=custom -h "$DB_HOST" -p "$DB_PORT" -U "$POSTGRES_USER" -d "$POSTGRES_USER" \\
  -f "$BACKUP_DIR/dump.partial"
mv "$BACKUP_DIR/dump.partial" "$BACKUP_DIR/$BACKUP_FILE"
""",
    Engine.MYSQL: "set -eu\n"
    + _MYSQL_OPTION_FILE
    + """\
mysql --defaults-extra-file="$cnf" -h "$DB_HOST" -P "$DB_PORT" -N -s -e 'SELECT VERSION()' \\
  > "$BACKUP_DIR/engine-version"
# sh has no pipefail: the dump's own status is kept aside and checked.
{ mysqldump --defaults-extra-file="$cnf" -h "$DB_HOST" -P "$DB_PORT" --single-transaction \\
    --quick --routines --triggers --events --hex-blob --no-tablespaces "$MYSQL_DATABASE" \\
    || echo failed > "$BACKUP_DIR/dump.failed"; } | gzip > "$BACKUP_DIR/dump.partial"
if [ -e "$BACKUP_DIR/dump.failed" ]; then echo "mysqldump failed" >&2; exit 1; fi
mv "$BACKUP_DIR/dump.partial" "$BACKUP_DIR/$BACKUP_FILE"
""",
    Engine.REDIS: """\
set -eu
redis-cli -h "$DB_HOST" -p "$DB_PORT" --no-auth-warning INFO server \\
  | sed -n 's/^redis_version:\\([^[:space:]]*\\).*$/\\1/p' > "$BACKUP_DIR/engine-version"
test -s "$BACKUP_DIR/engine-version"
redis-cli -h "$DB_HOST" -p "$DB_PORT" --no-auth-warning --rdb "$BACKUP_DIR/dump.partial"
mv "$BACKUP_DIR/dump.partial" "$BACKUP_DIR/$BACKUP_FILE"
""",
}

# The check every restore starts with: a data directory holding anything but lost+found (a
# fresh volume's) is never restored over.
_EMPTY_OR_STOP = """\
if [ -d "$DATA" ] && ls -A "$DATA" | grep -qvx 'lost+found'; then
  echo "the data directory $DATA is not empty: refusing to restore over data" \\
    "(delete the claim and the restore Job to try again onto a new volume)" >&2
  exit 3
fi
"""

# PostgreSQL: the entrypoint sources this from /docker-entrypoint-initdb.d with its temporary
# server up on the socket (PGHOST unset, or a test's socket folder). One transaction: all the
# dump, or nothing.
POSTGRES_LOADER = """\
pg_restore --single-transaction --no-owner --no-privileges --username "$POSTGRES_USER" \\
  --dbname "$POSTGRES_USER" "$RESTORE_FILE"
pg_ctl -D "$PGDATA" -m fast -w stop
echo "database-operator: restored $RESTORE_FILE"
exit 0
"""

# MySQL: likewise, against the temporary server on $SOCKET (set by the entrypoint). POSIX sh:
# an entrypoint may source it from sh, which has no pipefail, so each side of the pipe records
# its own failure (a truncated stream must not pass for a whole dump).
MYSQL_LOADER = (
    _MYSQL_OPTION_FILE
    + """\
failed="$(mktemp)"
trap 'rm -f "$cnf" "$failed"' EXIT
{ gzip -dc "$RESTORE_FILE" || echo "gzip -dc" >> "$failed"; } \\
  | { mysql --defaults-extra-file="$cnf" --protocol=socket --socket="$SOCKET" "$MYSQL_DATABASE" \\
      || echo mysql >> "$failed"; }
if [ -s "$failed" ]; then
  echo "database-operator: restoring $RESTORE_FILE failed in: $(cat "$failed")" >&2
  exit 1
fi
mysqladmin --defaults-extra-file="$cnf" --protocol=socket --socket="$SOCKET" shutdown
echo "database-operator: restored $RESTORE_FILE"
exit 0
"""
)

_RESTORE_WITH_ENTRYPOINT = """\
set -eu
DATA="$RESTORE_DATA_DIR"
{empty}
printf '%s\\n' "$RESTORE_LOADER" > /docker-entrypoint-initdb.d/zz-database-operator-restore.sh
exec docker-entrypoint.sh {server}
"""

# Redis: the engine checks the file, then it becomes the data directory's dump.rdb. A server
# with appendonly on loads only its AOF and, finding none, starts empty beside the RDB: for such a
# Database a server of its own (no network) loads the RDB and writes the AOF from it, as CONFIG
# SET appendonly does on a running server, before it shuts down.
_REDIS_RESTORE = """\
redis-check-rdb "$RESTORE_FILE"
cp "$RESTORE_FILE" "$DATA/dump.rdb.partial"
mv "$DATA/dump.rdb.partial" "$DATA/dump.rdb"
if [ "${RESTORE_APPENDONLY:-no}" = yes ]; then
  sock="$(mktemp -d)/restore.sock"
  redis-server --port 0 --unixsocket "$sock" --dir "$DATA" --appendonly no --save '' &
  server=$!
  until redis-cli -s "$sock" PING 2>/dev/null | grep -q PONG; do
    kill -0 "$server" || { echo "redis-server could not load $RESTORE_FILE" >&2; exit 1; }
    sleep 0.2
  done
  redis-cli -s "$sock" CONFIG SET appendonly yes >/dev/null
  persistence() { redis-cli -s "$sock" INFO persistence | tr -d '\\r'; }
  until persistence | grep -qx 'aof_rewrite_in_progress:0' \\
      && persistence | grep -qx 'aof_rewrite_scheduled:0' \\
      && [ -s "$DATA/appendonlydir/appendonly.aof.manifest" ]; do
    sleep 0.2
  done
  redis-cli -s "$sock" SHUTDOWN NOSAVE >/dev/null 2>&1 || true
  wait "$server" || true
fi
echo "database-operator: restored $RESTORE_FILE"
"""

_RESTORE = {
    Engine.POSTGRES: _RESTORE_WITH_ENTRYPOINT.format(empty=_EMPTY_OR_STOP, server="postgres"),
    Engine.MYSQL: _RESTORE_WITH_ENTRYPOINT.format(empty=_EMPTY_OR_STOP, server="mysqld"),
    Engine.REDIS: 'set -eu\nDATA="$RESTORE_DATA_DIR"\n' + _EMPTY_OR_STOP + _REDIS_RESTORE,
}

_LOADERS = {Engine.POSTGRES: POSTGRES_LOADER, Engine.MYSQL: MYSQL_LOADER}


@dataclass(frozen=True)
class Restore:
    """The restore container's script, and the loader it hands the image's entrypoint (None
    where the engine needs none)."""

    script: str
    loader: str | None


def dump(engine: Engine) -> str:
    """The dump container's script (``sh -c``). Reads ``DB_HOST``, ``DB_PORT``,
    ``BACKUP_DIR``, ``BACKUP_FILE`` and the engine's credentials from the environment."""
    return _DUMP[engine]


def restore(engine: Engine) -> Restore:
    """The restore container's script (``sh -c``). Reads ``RESTORE_FILE``,
    ``RESTORE_DATA_DIR``, ``RESTORE_LOADER`` and the engine's own environment."""
    return Restore(_RESTORE[engine], _LOADERS.get(engine))
