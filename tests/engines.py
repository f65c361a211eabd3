"""Debian's database engines on this machine, run as the pods run them, and their clients: what the
recipe tests (tests/integration/test_recipes.py, test_backup_recipes.py) and the exporters' fleet
(tests/exporters.py) start and talk to.

- A Database and what its containers get: `make_db`, `generated_credentials` (the Secret the
  operator generates), `container_env` (its keys under the engine's names).
- Processes: `running` (a server for the length of a ``with``), `run_as` and `engine_user` (the
  engines refuse to run as root: as root, Debian's user of the engine), `owned` (a folder that
  user may use).
- PostgreSQL: `postgres_bin`, `initdb` and `postgres_first_start` (the image's first start),
  `pg_ctl`, `psql` and `answers`/`answers_db`; `streaming_postgres`, a primary and a replica
  streaming from it, as replication.py's recipe sets them up.
- MySQL (MariaDB standing in): `mariadbd`, `mysql_first_start` (the image's first start),
  `mysql` and `mysql_answers`.
- Redis: `redis_server` (a recipe's command line and environment), `redis_cli` and `ping`.
"""

from __future__ import annotations

import base64
import contextlib
import glob
import os
import pwd
import shlex
import shutil
import subprocess
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from database_operator import desired, replication
from database_operator.api.models import Database
from database_operator.engines import Engine, facts
from tests.cluster import wait_for
from tests.controlplane import free_port, stop_process

#: How long one client command (a query, pg_ctl) may take: a test's large write takes a while.
COMMAND_TIMEOUT_S = 300


# --- a Database and its containers' env ----------------------------------------------------------


def make_db(engine: str, name: str = "shop", **spec: Any) -> Database:
    """A Database ``name`` in prod with two replicas, and ``spec`` (camelCase) on top."""
    metadata = {"name": name, "namespace": "prod", "uid": "u-1"}
    return Database.model_validate(
        {"metadata": metadata, "spec": {"engine": engine, "replicas": 2, **spec}}
    )


def generated_credentials(db: Database) -> dict[str, str]:
    """The values of a Secret exactly as the operator generates it."""
    secret = desired.secret(db, desired.generate_password(), desired.generate_password())
    return {k: base64.b64decode(v).decode() for k, v in secret["data"].items()}


def container_env(db: Database, credentials: dict[str, str]) -> dict[str, str]:
    """The env a database container gets: the Secret's keys under the engine's names."""
    engine = facts(db.spec.engine)
    keys = engine.secret_env | engine.replication_env
    return {var: credentials[key] for var, key in keys.items()} | engine.env


# --- processes and who runs them -----------------------------------------------------------------


@contextlib.contextmanager
def running(argv: list[str], env: dict[str, str], log: Path, user: str | None) -> Iterator[None]:
    with log.open("wb") as out:
        proc = subprocess.Popen(
            argv, env=env, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, user=user
        )
        try:
            yield
        finally:
            stop_process(proc, grace_s=20)


def run_as(user: str = "postgres") -> str | None:
    """postgres refuses to run as root: as root, run it as Debian's postgres user (or an
    engine's own user, as its image would)."""
    return user if os.geteuid() == 0 else None


def engine_user(engine: Engine) -> str | None:
    """The user an engine's image runs as (here: Debian's user of that engine)."""
    return run_as(
        {Engine.POSTGRES: "postgres", Engine.MYSQL: "mysql", Engine.REDIS: "redis"}[engine]
    )


def owned(path: Path, user: str | None) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    if user:
        entry = pwd.getpwnam(user)
        os.chown(path, entry.pw_uid, entry.pw_gid)
    return path


# --- PostgreSQL ----------------------------------------------------------------------------------


def postgres_bin() -> Path:
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/postgres"))
    assert found, "no PostgreSQL server here: run hack/install-engines.sh"
    return Path(found[-1]).parent


def initdb(data: Path, env: Mapping[str, str], folder: Path, user: str | None) -> None:
    """The official image's initdb step: the data directory, POSTGRES_USER as the superuser
    with POSTGRES_PASSWORD (the password file in ``folder``), POSTGRES_INITDB_ARGS (without
    them, initdb's defaults: every role trusted on the socket and from loopback), and its "host
    all all all scram-sha-256" line."""
    pwfile = folder / "pw"
    pwfile.write_text(env["POSTGRES_PASSWORD"] + "\n")
    if user:
        shutil.chown(pwfile, user)
    subprocess.run(
        [
            str(postgres_bin() / "initdb"),
            *("-D", str(data), "--username", env["POSTGRES_USER"], "--pwfile", str(pwfile)),
            *shlex.split(env.get("POSTGRES_INITDB_ARGS", "")),
        ],
        check=True,
        capture_output=True,
        user=user,
    )
    with (data / "pg_hba.conf").open("a") as image_hba:
        image_hba.write("host all all all scram-sha-256\n")


PSQL = ["psql", "-X", "-A", "-t", "-v", "ON_ERROR_STOP=1"]


def psql(port: int, password: str, user: str, sql: str, database: str = "app") -> str:
    done = subprocess.run(
        [*PSQL, "-h", "127.0.0.1", "-p", str(port), "-U", user, "-d", database, "-c", sql],
        env={**os.environ, "PGPASSWORD": password, "PGCONNECT_TIMEOUT": "3"},
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        raise RuntimeError(done.stderr)
    return done.stdout.strip()


def answers(port: int, password: str, user: str, sql: str) -> str | None:
    try:
        return psql(port, password, user, sql)
    except RuntimeError:
        return None


def answers_db(port: int, password: str, user: str) -> str | None:
    """The primary answers (on the postgres database, before "app" exists)."""
    try:
        return psql(port, password, user, "SELECT 1", "postgres")
    except RuntimeError:
        return None


def pg_ctl(env: Mapping[str, str], user: str | None, *args: str) -> int:
    """pg_ctl on the data directory; 0, or 3 (no server running). A server it starts logs to
    ``server.log`` beside the data (not to this pipe, which it would hold open)."""
    log = Path(env["PGDATA"]).parent / "server.log"
    done = subprocess.run(
        [str(postgres_bin() / "pg_ctl"), "-D", env["PGDATA"], "-l", str(log), *args],
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        user=user,
        timeout=COMMAND_TIMEOUT_S,
        check=False,
    )
    assert done.returncode in (0, 3), done.stderr + (log.read_text() if log.exists() else "")
    return done.returncode


def pg_running(env: Mapping[str, str], user: str | None) -> bool:
    return pg_ctl(env, user, "status") == 0


@contextlib.contextmanager
def postgres_first_start(env: Mapping[str, str], sockets: Path, user: str | None) -> Iterator[None]:
    """What the image's entrypoint does on a first start before its init scripts: `initdb`, a
    temporary server on the socket only, and the database named after the user. Afterwards it
    stops the server, if nothing (the loader) did."""
    data = Path(env["PGDATA"])
    initdb(data, env, owned(data.parent, user), user)
    only_socket = f"-c listen_addresses='' -c unix_socket_directories={sockets} -p {env['PGPORT']}"
    pg_ctl(env, user, "-o", only_socket, "-w", "start")
    try:
        subprocess.run(
            [*PSQL, "-U", env["POSTGRES_USER"], "-d", "postgres"],
            input=f'CREATE DATABASE "{env["POSTGRES_USER"]}";\n',
            env={**env, "PGHOST": str(sockets)},
            text=True,
            capture_output=True,
            check=True,
            user=user,
        )
        yield
    finally:
        if pg_running(env, user):
            pg_ctl(env, user, "-m", "fast", "-w", "stop")


@dataclass(frozen=True)
class PostgresPrimary:
    """The primary `streaming_postgres` started, before its replica: its port, its data
    directory, its container's env, its recipe, and who runs it."""

    port: int
    data: Path
    env: dict[str, str]
    recipe: replication.Recipe
    user: str | None


@contextlib.contextmanager
def streaming_postgres(
    env: Mapping[str, str],
    folder: Path,
    before_replica: Callable[[PostgresPrimary], None] | None = None,
) -> Iterator[tuple[int, int]]:
    """A PostgreSQL primary (the image's first start: initdb, the database named after the
    user; then replication.py's recipe and its postStart set-up), ``before_replica`` run on it,
    then a replica cloned and streaming from it (the replicas Deployment's command line),
    answering; their ports. ``env`` is the database container's, ``folder`` one the engine's
    user may use; the servers listen on 127.0.0.1, their sockets in ``folder``."""
    user = run_as()
    bindir = postgres_bin()
    path = f"{bindir}:{os.environ['PATH']}"
    sockets = owned(folder / "sockets", user)
    # What a shared test machine needs instead of a pod's own network and /var/run/postgresql.
    local = ["-c", "listen_addresses=127.0.0.1", "-c", f"unix_socket_directories={sockets}"]
    primary_port, replica_port = free_port(), free_port()
    primary_data = owned(folder / "primary", user) / "pgdata"
    initdb(primary_data, env, folder, user)
    recipe = replication.primary(
        Engine.POSTGRES, port=primary_port, data_dir=str(primary_data), settings=local
    )
    # The container's env; PGDATA where this machine keeps the data.
    primary_env = {**env, **recipe.env, "PATH": path, "PGDATA": str(primary_data)}
    superuser, password = env["POSTGRES_USER"], env["POSTGRES_PASSWORD"]
    assert recipe.args[0] == "postgres"
    with running(
        [str(bindir / "postgres"), "-D", str(primary_data), *recipe.args[1:]],
        primary_env,
        folder / "primary.log",
        user,
    ):
        wait_for(lambda: answers_db(primary_port, password, superuser), what="the primary")
        psql(primary_port, password, superuser, f'CREATE DATABASE "{superuser}"', "postgres")
        # The primary container's postStart hook, as it runs there.
        assert recipe.post_start is not None
        subprocess.run(
            recipe.post_start,
            env=primary_env,
            check=True,
            user=user,
            timeout=60,
            capture_output=True,
        )
        if before_replica is not None:
            before_replica(PostgresPrimary(primary_port, primary_data, primary_env, recipe, user))
        replica = replication.replica(
            Engine.POSTGRES,
            port=replica_port,
            data_dir="unused",
            primary_host="127.0.0.1",
            primary_port=primary_port,
            settings=local,
        )
        assert replica.command is not None
        replica_data = owned(folder / "replica", user) / "pgdata"
        replica_env = {**env, **replica.env, "PATH": path, "PGDATA": str(replica_data)}
        with running(replica.command, replica_env, folder / "replica.log", user):
            wait_for(
                lambda: answers(replica_port, password, superuser, "SELECT pg_is_in_recovery()"),
                timeout=60,
                what="the PostgreSQL replica",
            )
            yield primary_port, replica_port


# --- MySQL (MariaDB standing in) -----------------------------------------------------------------


def mysql(
    sql: str,
    user: str,
    password: str,
    *,
    port: int | None = None,
    socket: Path | None = None,
    database: str | None = None,
) -> bytes:
    """``sql`` through the mysql client (the test's own: its password in the environment),
    over TCP to 127.0.0.1:``port`` or on ``socket``; tab-separated rows, no headers."""
    where = (
        ["--protocol=tcp", "-h", "127.0.0.1", "-P", str(port)]
        if port
        else ["--protocol=socket", f"--socket={socket}"]
    )
    done = subprocess.run(
        [
            "mysql",
            "--no-defaults",
            "--default-character-set=utf8mb4",
            "-N",
            "-B",
            "-u",
            user,
            *where,
        ]
        + ([database] if database else []),
        input=sql.encode(),
        env={**os.environ, "MYSQL_PWD": password},
        capture_output=True,
        timeout=COMMAND_TIMEOUT_S,
        check=False,
    )
    if done.returncode != 0:
        raise RuntimeError(done.stderr.decode(errors="replace"))
    return done.stdout


def mysql_answers(user: str, password: str, **where: Any) -> bool:
    try:
        return mysql("SELECT 1", user, password, **where).strip() == b"1"
    except RuntimeError:
        return False


def sql_text(value: str) -> str:
    return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"


def sql_name(value: str) -> str:
    return "`" + value.replace("`", "``") + "`"


def mariadbd(data: Path, socket: Path, *settings: str) -> list[str]:
    """The server on ``data``, no configuration file of this machine's, its socket at
    ``socket`` and its pid file beside the data."""
    pid = data.parent / "mysqld.pid"
    return [
        "mariadbd",
        "--no-defaults",
        f"--datadir={data}",
        f"--socket={socket}",
        f"--pid-file={pid}",
        *settings,
    ]


@contextlib.contextmanager
def mysql_first_start(
    env: Mapping[str, str], data: Path, socket: Path, log: Path, user: str | None
) -> Iterator[None]:
    """What the image's entrypoint does on a first start before its init scripts: initialise
    the data directory, start a temporary server on the socket only (skip-networking), set the
    root password (root@localhost, and root@'%' as the image's MYSQL_ROOT_HOST default), create
    MYSQL_DATABASE and MYSQL_USER with all rights on it. Afterwards it stops the server, if
    nothing (the loader) did."""
    subprocess.run(
        [
            "mariadb-install-db",
            "--no-defaults",
            f"--datadir={data}",
            "--auth-root-authentication-method=normal",
            "--skip-test-db",
        ],
        cwd=data.parent,
        capture_output=True,
        check=True,
        user=user,
    )
    pid = data.parent / "mysqld.pid"
    with running(mariadbd(data, socket, "--skip-networking"), dict(os.environ), log, user):
        wait_for(lambda: mysql_answers("root", "", socket=socket), what="the temporary server")
        root, database = sql_text(env["MYSQL_ROOT_PASSWORD"]), sql_name(env["MYSQL_DATABASE"])
        app = sql_text(env["MYSQL_USER"])
        mysql(
            f"""
            DROP USER IF EXISTS root@'127.0.0.1', root@'::1';
            EXECUTE IMMEDIATE CONCAT('DROP USER IF EXISTS root@', QUOTE(@@hostname));
            ALTER USER root@localhost IDENTIFIED BY {root};
            CREATE USER root@'%' IDENTIFIED BY {root};
            GRANT ALL ON *.* TO root@'%' WITH GRANT OPTION;
            CREATE DATABASE IF NOT EXISTS {database};
            CREATE USER {app}@'%' IDENTIFIED BY {sql_text(env["MYSQL_PASSWORD"])};
            GRANT ALL ON {database}.* TO {app}@'%';
            """,
            "root",
            "",
            socket=socket,
        )
        try:
            yield
        finally:
            if pid.exists():
                subprocess.run(
                    ["mysqladmin", "--no-defaults", f"--socket={socket}", "-uroot", "shutdown"],
                    env={**os.environ, "MYSQL_PWD": env["MYSQL_ROOT_PASSWORD"]},
                    capture_output=True,
                    check=True,
                )
            wait_for(lambda: not pid.exists(), what="the temporary server to stop")


# --- Redis ---------------------------------------------------------------------------------------


def redis_cli(port: int, password: str, *command: str) -> str:
    done = subprocess.run(
        ["redis-cli", "-h", "127.0.0.1", "-p", str(port), *command],
        env={**os.environ, "REDISCLI_AUTH": password},
        capture_output=True,
        text=True,
        check=True,
    )
    return done.stdout.strip()


def redis_server(
    recipe: replication.Recipe, env: Mapping[str, str], folder: Path
) -> tuple[list[str], dict[str, str]]:
    """A Redis recipe's argument list, ``$(VAR)`` expanded from the container's ``env`` as the
    kubelet does, and the environment it runs with: the container's, and on its PATH an entry
    point that starts what it is given (the image's would give the working directory away), in
    a folder of ``folder``'s that any user may read (the server may run as Redis's)."""
    bin_dir = folder / "entrypoint"
    bin_dir.mkdir(exist_ok=True)
    entrypoint = bin_dir / "docker-entrypoint.sh"
    entrypoint.write_text('#!/bin/sh\nexec "$@"\n')
    for path in (folder, bin_dir, entrypoint):
        path.chmod(path.stat().st_mode | 0o555)
    assert recipe.command is not None
    argv = [replication.expand(arg, env) for arg in recipe.command]
    return argv, {**os.environ, **env, "PATH": f"{bin_dir}:{os.environ['PATH']}"}


def ping(port: int, password: str) -> bool:
    try:
        return redis_cli(port, password, "PING") == "PONG"
    except subprocess.CalledProcessError:
        return False
