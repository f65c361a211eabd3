"""Per-engine facts: the one place that knows what postgres, mysql and redis need.

Everything engine-specific (official image, default version, port, the keys the credentials Secret
must hold, how the keys reach the container, probes, the UID the image runs as, where data lives)
is here, so that the API defaults, the child builders and the docs agree.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum


class Engine(StrEnum):
    """The database engines the operator can run."""

    POSTGRES = "postgres"
    MYSQL = "mysql"
    REDIS = "redis"


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


ENGINES: dict[Engine, EngineFacts] = {
    Engine.POSTGRES: EngineFacts(
        image="docker.io/library/postgres",
        default_version="16",
        port=5432,
        secret_keys=("username", "password"),
        secret_env={"POSTGRES_USER": "username", "POSTGRES_PASSWORD": "password"},
        # A subdirectory: a fresh volume's root holds lost+found, which initdb refuses.
        env={"PGDATA": "/var/lib/postgresql/data/pgdata"},
        ready_command=("sh", "-c", 'pg_isready -h 127.0.0.1 -U "$POSTGRES_USER"'),
        data_path="/var/lib/postgresql/data",
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
        ready_command=(
            "sh",
            "-c",
            'mysqladmin ping -h 127.0.0.1 -u"$MYSQL_USER" -p"$MYSQL_PASSWORD"',
        ),
        data_path="/var/lib/mysql",
    ),
    Engine.REDIS: EngineFacts(
        image="docker.io/library/redis",
        default_version="7.4",
        port=6379,
        secret_keys=("password",),
        # REDISCLI_AUTH lets the probe's redis-cli authenticate without a password argument.
        secret_env={"REDIS_PASSWORD": "password", "REDISCLI_AUTH": "password"},
        args=("--requirepass", "$(REDIS_PASSWORD)", "--dir", "/data"),
        ready_command=("redis-cli", "-h", "127.0.0.1", "ping"),
        data_path="/data",
        default_username=None,
    ),
}


def facts(engine: Engine | str) -> EngineFacts:
    """The facts of one engine."""
    return ENGINES[Engine(engine)]
