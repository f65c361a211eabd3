"""Per-engine facts: the one place that knows what postgres, mysql and redis need.

Everything engine-specific (official image, default version, port, the keys the credentials Secret
must hold, how the keys reach the container, probes, the UID the image runs as, where data lives)
is here, so that the API defaults, the child builders and the docs agree.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum


class Engine(StrEnum):
    """The database engines the operator can run."""

    POSTGRES = "postgres"
    MYSQL = "mysql"
    REDIS = "redis"


@dataclass(frozen=True)
class ExporterFacts:
    """The Prometheus community exporter that runs beside the engine when monitoring is on.

    The image is pinned to the release whose flags, environment and metric names the tests prove
    with Debian's build of that release (tests/exporters.py); spec.monitoring.image overrides.
    """

    image: str
    #: The port the exporter serves /metrics on (its conventional one).
    port: int
    #: Exporter env var -> key of the credentials Secret it is read from.
    secret_env: dict[str, str]
    #: Plain env vars, after the secret ones: ``{port}`` is the engine's port; ``$(VAR)`` names
    #: a secret one and is expanded by the kubelet, so no value is ever stored in the pod spec.
    env: dict[str, str]
    #: The flag that sets the exporter's listen address.
    listen_flag: str = "--web.listen-address"
    #: Further command-line flags (never a credential); ``$(VAR)`` names an env var above,
    #: expanded by the kubelet.
    args: tuple[str, ...] = ()
    #: The exporter logs in as a user of its own whose password is made in the pod, in memory
    #: (desired/monitoring.py: an init container writes it into MONITORING_DIR; the engine
    #: creates the user from it), instead of reading the credentials Secret.
    own_user: bool = False
    #: Plain env the engine's container gets while the exporter runs (PostgreSQL: the role the
    #: exporter logs in as, which the engine's set-up creates).
    engine_env: dict[str, str] = field(default_factory=dict)


#: The PostgreSQL role the read replicas and standbys stream as (replication.py).
POSTGRES_REPLICATION_USER = "replicator"
#: The PostgreSQL role the exporter logs in as: pg_monitor's statistics and settings, nothing
#: else (no table, no superuser). It needs no password: pg_hba.conf trusts it from the pod's
#: own loopback address alone, which only the pod's containers reach; every other loopback
#: connection needs a password (replication.py). A reserved name: an application user of that
#: name gets no trust line.
POSTGRES_MONITORING_ROLE = "database_monitor"
#: Where a pod's exporter credentials are made (an in-memory volume), with ``own_user``.
MONITORING_DIR = "/run/monitoring"
#: The Redis ACL user the exporter logs in as: statistics, never a key; not CONFIG (its GET
#: answers requirepass and masterauth), nor SLOWLOG GET (a slow command's arguments: keys and
#: values). EVAL runs the exporter's script, which reads INFO's maxclients (in place of CONFIG
#: GET's); a script runs with its caller's permissions.
REDIS_MONITORING_USER = "monitoring"
REDIS_MONITORING_ACL = (
    "-@all +ping +info +latency|latest +latency|histogram +slowlog|len +client|setname +eval "
    "resetkeys resetchannels"
)


@dataclass(frozen=True)
class EngineFacts:
    """What the operator needs to know to run one engine from its official image."""

    image: str
    default_version: str
    port: int
    #: Keys the credentials Secret must hold.
    secret_keys: tuple[str, ...]
    #: Container env var -> Secret key it is read from.
    secret_env: dict[str, str]
    #: Plain container env vars.
    env: dict[str, str] = field(default_factory=dict)
    #: Container args (``$(VAR)`` is expanded by the kubelet from the env, never stored).
    args: tuple[str, ...] = ()
    #: Readiness probe command, run in the container.
    ready_command: tuple[str, ...] = ()
    #: Where the image keeps its data; the PVC or an emptyDir is mounted here.
    data_path: str = "/data"
    #: The non-root UID/GID the official image is built to run as.
    uid: int = 999
    #: The username written into a generated Secret (engines without users have none).
    default_username: str | None = "app"
    #: Names of the engine's own users the operator makes: an application user of one of them
    #: would be taken over (its password set to another's, or trusted without one).
    reserved_usernames: tuple[str, ...] = ()
    #: Whether the operator runs read replicas with the engine's own replication.
    replication: bool = False
    #: Keys a Secret must hold only when the Database has read replicas (the generated Secret
    #: always gets them, so scaling up needs nothing new), and the env vars they reach.
    replication_keys: tuple[str, ...] = ()
    replication_env: dict[str, str] = field(default_factory=dict)
    #: Engine settings the operator sets itself (port, data, replication, passwords): refused in
    #: spec.parameters.
    reserved_parameters: tuple[str, ...] = ()
    #: How a setting goes on the command line: "-c key=value", "--key=value" or "--key value".
    parameter_style: str = "--key=value"
    #: Service Binding (servicebinding.io) facts: its `type`, the URI scheme, the JDBC scheme
    #: (None: no JDBC driver), whether the engine has a database name (the username), and the
    #: user to connect as where the Secret has none (redis: its ACL's default user).
    binding_type: str = ""
    uri_scheme: str = ""
    jdbc_scheme: str | None = None
    has_database: bool = True
    binding_username: str | None = None
    #: How many major versions the engine itself steps up on existing data when a newer server
    #: starts on it: 0 none (another major cannot open the data at all), None any number.
    #: No engine goes down: a newer major's data files are unreadable to an older one.
    major_upgrade_steps: int | None = 0
    #: What to do instead of a version change the engine cannot make on its data.
    major_upgrade_path: str = ""
    #: The metrics exporter of spec.monitoring.
    exporter: ExporterFacts | None = None


ENGINES: dict[Engine, EngineFacts] = {
    Engine.POSTGRES: EngineFacts(
        image="docker.io/library/postgres",
        default_version="16",
        port=5432,
        secret_keys=("username", "password"),
        secret_env={"POSTGRES_USER": "username", "POSTGRES_PASSWORD": "password"},
        # A subdirectory: a fresh volume's root holds lost+found, which initdb refuses. The
        # loopback lines initdb writes ask for a password (by default they trust every role:
        # any container of the pod would be the superuser); replication.py makes it so for the
        # data directories made before too.
        env={
            "PGDATA": "/var/lib/postgresql/data/pgdata",
            "POSTGRES_INITDB_ARGS": "--auth-host=scram-sha-256",
        },
        ready_command=("sh", "-c", 'pg_isready -h 127.0.0.1 -U "$POSTGRES_USER"'),
        data_path="/var/lib/postgresql/data",
        replication=True,
        replication_keys=("replication-password",),
        replication_env={"REPLICATION_PASSWORD": "replication-password"},
        reserved_usernames=(POSTGRES_REPLICATION_USER, POSTGRES_MONITORING_ROLE),
        reserved_parameters=(
            "port",
            "data_directory",
            "hba_file",
            "ident_file",
            "listen_addresses",
            "unix_socket_directories",
            "hot_standby",
            "primary_conninfo",
            "primary_slot_name",
            "wal_log_hints",
            "restore_command",
            "wal_level",
            "max_wal_senders",
            "password_encryption",
        ),
        parameter_style="-c key=value",
        # The server refuses a data directory of another major version.
        major_upgrade_steps=0,
        major_upgrade_path="create a new Database at the new version and move the data into "
        "it (pg_dump | pg_restore, or pg_upgrade)",
        binding_type="postgresql",
        uri_scheme="postgresql",
        jdbc_scheme="postgresql",
        # No Secret: the exporter logs in as a role of its own that pg_hba.conf trusts from the
        # pod's loopback address (the engine's set-up, replication.py, makes both).
        exporter=ExporterFacts(
            image="quay.io/prometheuscommunity/postgres-exporter:v0.11.1",
            port=9187,
            secret_env={},
            env={
                "DATA_SOURCE_URI": "127.0.0.1:{port}/postgres?sslmode=disable",
                "DATA_SOURCE_USER": POSTGRES_MONITORING_ROLE,
            },
            engine_env={"MONITORING_ROLE": POSTGRES_MONITORING_ROLE},
        ),
    ),
    Engine.MYSQL: EngineFacts(
        image="docker.io/library/mysql",
        default_version="8.4",
        port=3306,
        secret_keys=("username", "password"),
        secret_env={
            "MYSQL_USER": "username",
            "MYSQL_DATABASE": "username",
            "MYSQL_PASSWORD": "password",
            "MYSQL_ROOT_PASSWORD": "password",
        },
        # No credentials: `mysqladmin ping` answers 0 whenever the server accepts connections,
        # even "Access denied" (MySQL's documentation; MariaDB's too, tested), and 1 when it
        # does not (the image's first-start server listens on no TCP port). A password here
        # would be on the probe's command line every 10 s.
        ready_command=("mysqladmin", "ping", "-h", "127.0.0.1"),
        data_path="/var/lib/mysql",
        reserved_parameters=(
            "port",
            "datadir",
            "socket",
            "bind-address",
            "user",
            "skip-networking",
            "server-id",
            "log-bin",
            "init-file",
        ),
        parameter_style="--key=value",
        # MySQL upgrades its data dictionary in place from the previous major series only.
        major_upgrade_steps=1,
        major_upgrade_path="upgrade one major version at a time (each pod start upgrades the "
        "data in place), or create a new Database and move the data (mysqldump)",
        binding_type="mysql",
        uri_scheme="mysql",
        jdbc_scheme="mysql",
        # root (MYSQL_ROOT_PASSWORD is the Secret's password) holds PROCESS and REPLICATION
        # CLIENT, which the application user lacks. The driver splits the DSN at its last '@'
        # and last '/', so any password fits; the trailing '?' because the exporter appends
        # its own parameters with '&' whenever the DSN holds a '?' anywhere (a password's
        # included), which without it would name a database.
        exporter=ExporterFacts(
            image="docker.io/prom/mysqld-exporter:v0.14.0",
            port=9104,
            secret_env={
                "MYSQL_EXPORTER_PASSWORD": "password",
                "MYSQL_EXPORTER_DATABASE": "username",
            },
            env={"DATA_SOURCE_NAME": "root:$(MYSQL_EXPORTER_PASSWORD)@(127.0.0.1:{port})/?"},
            # The tables' sizes (mysql_info_schema_table_size{schema,table,component}): the only
            # size this release serves, and off by default; of the application's database (the
            # image's MYSQL_DATABASE, named after the user), not of every schema: `sys` alone
            # would add five series for each of its hundred views.
            args=(
                "--collect.info_schema.tables",
                "--collect.info_schema.tables.databases=$(MYSQL_EXPORTER_DATABASE)",
            ),
        ),
    ),
    Engine.REDIS: EngineFacts(
        image="docker.io/library/redis",
        default_version="7.4",
        port=6379,
        secret_keys=("password",),
        # REDISCLI_AUTH lets the probe's redis-cli authenticate without a password argument.
        secret_env={"REDIS_PASSWORD": "password", "REDISCLI_AUTH": "password"},
        ready_command=("redis-cli", "-h", "127.0.0.1", "ping"),
        data_path="/data",
        default_username=None,
        replication=True,
        reserved_parameters=(
            "port",
            "dir",
            "requirepass",
            "masterauth",
            "masteruser",
            "replicaof",
            "slaveof",
            "replica-read-only",
            "slave-read-only",
            "bind",
            "protected-mode",
            "aclfile",
            "include",
        ),
        parameter_style="--key value",
        # Any newer Redis loads an older RDB/AOF file.
        major_upgrade_steps=None,
        binding_type="redis",
        uri_scheme="redis",
        has_database=False,
        binding_username="default",
        exporter=ExporterFacts(
            image="docker.io/oliver006/redis_exporter:v1.45.0",
            port=9121,
            # No Secret: the monitoring user's password is in a file, whose JSON maps the
            # local server's address to it. That release's /scrape?target= connects anywhere
            # with a password given by flag or env (an attacker's server would receive it),
            # but with a file only to the address the file names.
            secret_env={},
            env={"REDIS_ADDR": "redis://127.0.0.1:{port}", "REDIS_USER": REDIS_MONITORING_USER},
            args=(
                f"--redis.password-file={MONITORING_DIR}/passwords.json",
                "--config-command=-",
                f"--script={MONITORING_DIR}/maxclients.lua",
            ),
            own_user=True,
        ),
    ),
}


def facts(engine: Engine | str) -> EngineFacts:
    """The facts of one engine."""
    return ENGINES[Engine(engine)]


_MAJOR = re.compile(r"^v?(\d+)(?:[.-]|$)")


def major_version(version: str) -> int | None:
    """The major version in an image tag ("16", "16.4", "8.4-oracle", "7.4-alpine"), or None
    when the tag does not start with one ("latest", "bookworm")."""
    found = _MAJOR.match(version)
    return int(found.group(1)) if found else None


def reserved_key(engine: Engine | str, key: str) -> bool:
    """Whether a setting is one the operator sets itself. postgres settings are
    case-insensitive; mysql takes '-' and '_' alike; redis takes either case."""
    norm = key.lower().replace("_", "-")
    return any(norm == r.lower().replace("_", "-") for r in facts(engine).reserved_parameters)


def parameter_args(engine: Engine | str, parameters: Mapping[str, str]) -> list[str]:
    """The engine's command-line form of its settings, in key order."""
    style = facts(engine).parameter_style
    args: list[str] = []
    for key, value in sorted(parameters.items()):
        if style == "-c key=value":
            args += ["-c", f"{key}={value}"]
        elif style == "--key value":
            args += [f"--{key}", value]
        else:
            args.append(f"--{key}={value}")
    return args
