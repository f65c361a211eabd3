"""How each engine runs as a primary and as a read replica: the command lines, environment and
set-up the pods run, in one place.

The pod builders (desired/workload.py) and the recipe tests (tests/integration/test_recipes.py,
which start Debian's own postgres and redis-server on loopback, set up a primary, attach a
replica, write on one and read on the other) take them from here, so what is tested is what the
pods run. Values in ``$(VAR)`` form are expanded by the kubelet from the container's env (the
tests expand them the same way: `expand`); shell scripts read ``$VAR`` themselves. Secrets reach
both only through the environment, never through these strings.

PostgreSQL: streaming replication with hot standby. The primary gets a replication role
(``REPLICATION_USER``, password from the Secret key ``replication-password``) and its pg_hba
line, set up after every start (idempotent: an existing single instance scaled up gets them too,
and a rotated password is applied); with spec.monitoring, the exporter's role too. No role logs
in over the pod's loopback without a password, but the exporter's (`POSTGRES_HBA`). A replica
clones the primary with ``pg_basebackup -R`` into
its ephemeral data directory at every start, then runs as a hot standby.

Redis: ``replicaof`` the primary's Service, authenticating with the same password
(``masterauth``); replicas are read-only. Its passwords reach it on its standard input
(`REDIS_SERVER`).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field

from database_operator.engines import (
    POSTGRES_REPLICATION_USER,
    REDIS_MONITORING_ACL,
    REDIS_MONITORING_USER,
    Engine,
)

#: The role the PostgreSQL replicas connect as.
REPLICATION_USER = POSTGRES_REPLICATION_USER
#: PostgreSQL listens on localhost only unless told otherwise; the official image's sample
#: config says '*', Debian's does not. Set here, so a pod serves its Service whatever the image.
#: Before the user's settings: the last ``-c`` of a name wins (the recipe tests narrow it).
LISTEN_EVERYWHERE = ("-c", "listen_addresses=*")
#: The pg_hba.conf line that lets it stream from any address, with a password.
PG_HBA_REPLICATION = f"host replication {REPLICATION_USER} all scram-sha-256"


@dataclass(frozen=True)
class Recipe:
    """What a container runs: ``command`` (None: the image's entrypoint), ``args``, extra plain
    ``env``, and a script to run once the server is up (a postStart hook; None: nothing)."""

    command: list[str] | None
    args: list[str]
    env: dict[str, str] = field(default_factory=dict)
    post_start: list[str] | None = None


# pg_hba.conf, at each start of every PostgreSQL server (idempotent, so a data directory an
# earlier release made gets it too): initdb's loopback lines trust every role (the official
# image keeps them), so that any container of the pod could log in as the superuser without a
# password; they ask for one instead (the lines for all users: never the exporter's below).
# The exporter's role (spec.monitoring) is trusted from the loopback address alone, first: it
# reads statistics only, and only the pod's own containers reach that address. Never for a role
# named as the application's user.
POSTGRES_HBA = r"""hba="$PGDATA/pg_hba.conf"
space='[[:space:]]+' word='[^[:space:]]+' loopback='(127\.0\.0\.1/32|::1/128)'
line="^(host$space$word${space}all$space$loopback$space)trust[[:space:]]*\$"
sed -i -E "s#$line#\1scram-sha-256#" "$hba"
monitor=false
if [ -n "${MONITORING_ROLE:-}" ] && [ "$MONITORING_ROLE" != "${POSTGRES_USER:-}" ]; then
  monitor=true
  for address in ::1/128 127.0.0.1/32; do
    line="host all $MONITORING_ROLE $address trust"
    grep -qxF "$line" "$hba" || sed -i "1i $line" "$hba"
  done
fi
"""

# PostgreSQL's set-up after every start of a primary or an instance: wait for the server (the
# image's first start runs initdb with a server on the socket only), pg_hba.conf (above, and
# the replication line once), the replication role and the exporter's, reload. A standby has
# the roles from its primary, and writes nothing. The roles' commit is local: in zero-loss
# mode, with no standby connected yet, it would wait for one, and the hook (and so the pod)
# with it. The password goes in as a psql variable, read by psql from the environment (a
# backquoted `printenv`: never on a command line), quoted by psql (%L): never spliced into SQL
# text. The exporter's role has no password: it can log in from the pod's loopback only.
POSTGRES_PRIMARY_SETUP = f"""\
set -eu
until pg_isready -q -h 127.0.0.1; do sleep 1; done
{POSTGRES_HBA}replicate=false
if [ -n "${{REPLICATION_PASSWORD:-}}" ]; then
  replicate=true
  grep -qxF '{PG_HBA_REPLICATION}' "$hba" || echo '{PG_HBA_REPLICATION}' >> "$hba"
fi
PGPASSWORD="$POSTGRES_PASSWORD" psql -v ON_ERROR_STOP=1 -q -h 127.0.0.1 \\
  -U "$POSTGRES_USER" -d postgres -v user={REPLICATION_USER} -v replicate="$replicate" \\
  -v monitor="$monitor" -v monitoring="${{MONITORING_ROLE:-}}" <<'SQL'
SET synchronous_commit TO local;
\\if :replicate
\\set password `printenv REPLICATION_PASSWORD`
SELECT format('CREATE ROLE %I', :'user')
  WHERE NOT EXISTS (SELECT FROM pg_roles WHERE rolname = :'user') AND NOT pg_is_in_recovery()
\\gexec
SELECT format('ALTER ROLE %I WITH REPLICATION LOGIN PASSWORD %L', :'user', :'password')
  WHERE NOT pg_is_in_recovery() \\gexec
\\endif
\\if :monitor
SELECT format('CREATE ROLE %I', :'monitoring')
  WHERE NOT EXISTS (SELECT FROM pg_roles WHERE rolname = :'monitoring')
  AND NOT pg_is_in_recovery() \\gexec
SELECT format('ALTER ROLE %I WITH LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE NOREPLICATION '
  'NOBYPASSRLS PASSWORD NULL', :'monitoring') WHERE NOT pg_is_in_recovery() \\gexec
SELECT format('GRANT pg_monitor TO %I', :'monitoring') WHERE NOT pg_is_in_recovery() \\gexec
\\endif
SELECT pg_reload_conf();
SQL
"""  # noqa: S608 - constants only; the password is a psql variable, quoted by psql

# A PostgreSQL replica: clone the primary afresh (the data directory is ephemeral), retrying
# until the primary answers, then run as a hot standby with the settings given as arguments,
# its pg_hba.conf as every server's (the clone's is the primary's, which may not have it yet).
POSTGRES_REPLICA = f"""\
set -eu
export PGPASSWORD="$REPLICATION_PASSWORD"
mkdir -p "$PGDATA"
chmod 0700 "$PGDATA"
until rm -rf "${{PGDATA:?}}"/* && pg_basebackup -h "$PRIMARY_HOST" -p "$PRIMARY_PORT" \\
    -U {REPLICATION_USER} -D "$PGDATA" -R -X stream -c fast; do
  echo "waiting for the primary at $PRIMARY_HOST:$PRIMARY_PORT" >&2
  sleep 2
done
{POSTGRES_HBA}exec postgres -D "$PGDATA" -c hot_standby=on \\
  {LISTEN_EVERYWHERE[0]} '{LISTEN_EVERYWHERE[1]}' "$@"
"""


# Every instance first takes a lock on its volume, held by the server for its whole life: a
# deleted pod's replacement starts at once, on the same volume and node, while the old server is
# still stopping (PostgreSQL's fast shutdown, Redis's save); it waits for that server to be gone
# instead of starting a second one on the same data (for Redis, from an older snapshot).
#: The lock file at the root of an instance's volume.
LOCK_FILE = ".instance.lock"
INSTANCE_LOCK = """\
exec 9>>"$INSTANCE_LOCK"
if ! flock -n 9; then
  echo "waiting for this instance's previous server to stop" >&2
  flock 9
fi
"""

#: What every PostgreSQL instance runs with, before the user's settings (which win): hint bits
#: WAL-logged, which pg_rewind needs; and WAL kept for a standby that was away (restarted in a
#: rollout, or following a new timeline after a failover), which it otherwise finds removed and
#: can never catch up from (CloudNativePG keeps the same 512MB).
INSTANCE_SETTINGS = "-c wal_log_hints=on -c wal_keep_size=512MB"

# A PostgreSQL instance of a Database with spec.failover: its role comes from TARGET_PRIMARY
# (the ConfigMap <name>-instances, read by the kubelet at each start of the container), so an
# instance that restarts after a failover can never come back as a second primary.
# - The target primary runs the image's entry point (initdb on an empty volume). A standby made
#   target stays a standby until the operator promotes it (pg_promote): never on its own.
# - Any other instance is a hot standby of the primary's Service. On an empty volume it clones
#   the primary. On a volume that was a primary's (no standby.signal) it first waits for the new
#   primary, then rewinds onto its timeline (pg_rewind, which recovers a crashed data directory
#   first); a failed rewind clones afresh. The replication password reaches the WAL receiver
#   through the environment (libpq's PGPASSWORD), never a file or a command line.
POSTGRES_INSTANCE = f"""\
set -eu
{INSTANCE_LOCK}conninfo="host=$PRIMARY_HOST port=$PRIMARY_PORT user={REPLICATION_USER}"
conninfo="$conninfo application_name=$INSTANCE_NAME"
if [ "$TARGET_PRIMARY" = "$INSTANCE_NAME" ]; then
  export PGPASSWORD="${{REPLICATION_PASSWORD:-}}"
  exec docker-entrypoint.sh postgres {LISTEN_EVERYWHERE[0]} '{LISTEN_EVERYWHERE[1]}' \
    {INSTANCE_SETTINGS} -c "primary_conninfo=$conninfo" "$@"
fi
mkdir -p "$PGDATA"
chmod 0700 "$PGDATA"
if [ -s "$PGDATA/PG_VERSION" ] && [ ! -f "$PGDATA/standby.signal" ]; then
  until pg_isready -q -h "$PRIMARY_HOST" -p "$PRIMARY_PORT"; do
    echo "waiting for the primary at $PRIMARY_HOST:$PRIMARY_PORT to rewind onto" >&2
    sleep 1
  done
  if ! PGPASSWORD="$POSTGRES_PASSWORD" pg_rewind -D "$PGDATA" \
      --source-server="host=$PRIMARY_HOST port=$PRIMARY_PORT user=$POSTGRES_USER dbname=postgres"
  then
    echo "pg_rewind failed: cloning the primary afresh" >&2
    rm -rf "${{PGDATA:?}}"/*
  fi
fi
export PGPASSWORD="$REPLICATION_PASSWORD"
if [ ! -s "$PGDATA/PG_VERSION" ]; then
  until rm -rf "${{PGDATA:?}}"/* && pg_basebackup -h "$PRIMARY_HOST" -p "$PRIMARY_PORT" \
      -U {REPLICATION_USER} -D "$PGDATA" -X stream -c fast; do
    echo "waiting for the primary at $PRIMARY_HOST:$PRIMARY_PORT" >&2
    sleep 2
  done
fi
touch "$PGDATA/standby.signal"
exec postgres -D "$PGDATA" -c hot_standby=on {LISTEN_EVERYWHERE[0]} '{LISTEN_EVERYWHERE[1]}' \
  {INSTANCE_SETTINGS} -c "primary_conninfo=$conninfo" "$@"
"""


# Redis, every role: the server's arguments are the script's; its passwords (requirepass, and
# masterauth, so that the same arguments serve a primary and its replicas) reach it in a config
# read from its standard input (the last argument, "-"), never on its command line, where the
# kubelet would write the value into the container's arguments (the runtime's config, `ps`).
# Quoted for Redis's config syntax ("...", with \ and " escaped by sed from its standard input).
# With monitoring, the exporter's user too: its password is read from the file the pod's
# init container made (hexadecimal: nothing to quote).
REDIS_SERVER = f"""\
password="$(printf '%s' "$REDIS_PASSWORD" | sed 's/[\\\\"]/\\\\&/g')"
monitoring=""
if [ -n "${{MONITORING_PASSWORD_FILE:-}}" ]; then
  monitoring="user {REDIS_MONITORING_USER} on >$(cat "$MONITORING_PASSWORD_FILE")"
  monitoring="$monitoring {REDIS_MONITORING_ACL}"
fi
exec docker-entrypoint.sh redis-server "$@" - <<EOF
requirepass "$password"
masterauth "$password"
$monitoring
EOF
"""

# A Redis instance of a Database with spec.failover: the target primary runs as a master on its
# data; any other as a read-only replica of the primary's Service (a full resync replaces what
# a former master had that its successor has not).
REDIS_INSTANCE = f"""\
set -eu
{INSTANCE_LOCK}if [ "$TARGET_PRIMARY" != "$INSTANCE_NAME" ]; then
  set -- "$@" --replicaof "$PRIMARY_HOST" "$PRIMARY_PORT" --replica-read-only yes
fi
{REDIS_SERVER}"""


def primary(engine: Engine, *, port: int, data_dir: str, settings: list[str]) -> Recipe:
    """The primary (or single instance) of ``engine``, listening on ``port``."""
    if engine is Engine.POSTGRES:
        return Recipe(
            command=None,
            args=["postgres", *LISTEN_EVERYWHERE, *settings],
            env={"PGPORT": str(port)},
            post_start=["sh", "-c", POSTGRES_PRIMARY_SETUP],
        )
    if engine is Engine.REDIS:
        return _redis(_redis_base(port, data_dir) + settings)
    # mysql: the image's entrypoint and its port; settings only.
    return Recipe(command=None, args=list(settings))


def replica(
    engine: Engine,
    *,
    port: int,
    data_dir: str,
    primary_host: str,
    primary_port: int,
    settings: list[str],
) -> Recipe:
    """A read replica of ``engine`` following the primary at ``primary_host:primary_port``."""
    if engine is Engine.POSTGRES:
        return Recipe(
            command=["sh", "-c", POSTGRES_REPLICA, "replica", *settings],
            args=[],
            env={
                "PGPORT": str(port),
                "PRIMARY_HOST": primary_host,
                "PRIMARY_PORT": str(primary_port),
            },
        )
    if engine is Engine.REDIS:
        follow = ["--replicaof", primary_host, str(primary_port), "--replica-read-only", "yes"]
        return _redis(_redis_base(port, data_dir) + follow + settings)
    raise ValueError(f"{engine} has no replication the operator sets up")


def instance(
    engine: Engine,
    *,
    name: str,
    port: int,
    data_dir: str,
    primary_host: str,
    primary_port: int,
    settings: list[str],
) -> Recipe:
    """Instance ``name`` of ``engine`` under spec.failover: the primary or a standby, as
    TARGET_PRIMARY (from the environment) says at each start."""
    if engine is Engine.REDIS:
        return Recipe(
            command=["sh", "-c", REDIS_INSTANCE, name, *_redis_base(port, data_dir), *settings],
            args=[],
            env={
                "INSTANCE_NAME": name,
                "INSTANCE_LOCK": f"{data_dir}/{LOCK_FILE}",
                "PRIMARY_HOST": primary_host,
                "PRIMARY_PORT": str(primary_port),
            },
        )
    if engine is not Engine.POSTGRES:
        raise ValueError(f"{engine} has no failover the operator sets up")
    return Recipe(
        command=["sh", "-c", POSTGRES_INSTANCE, name, *settings],
        args=[],
        env={
            "PGPORT": str(port),
            "INSTANCE_NAME": name,
            "INSTANCE_LOCK": f"{data_dir}/{LOCK_FILE}",
            "PRIMARY_HOST": primary_host,
            "PRIMARY_PORT": str(primary_port),
        },
        post_start=["sh", "-c", POSTGRES_PRIMARY_SETUP],
    )


def _redis(arguments: list[str]) -> Recipe:
    """A Redis server (primary or read replica) with ``arguments``: REDIS_SERVER."""
    return Recipe(command=["sh", "-c", f"set -eu\n{REDIS_SERVER}", "redis", *arguments], args=[])


def _redis_base(port: int, data_dir: str) -> list[str]:
    return ["--port", str(port), "--dir", data_dir]


_REFERENCE = re.compile(r"\$\(([A-Za-z_][A-Za-z0-9_]*)\)")


def expand(text: str, env: Mapping[str, str]) -> str:
    """``$(VAR)`` references expanded as the kubelet does (unknown ones are left as written)."""
    return _REFERENCE.sub(lambda m: env.get(m.group(1), m.group(0)), text)
