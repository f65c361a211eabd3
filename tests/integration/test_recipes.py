"""The replication recipes, run for real: Debian's own PostgreSQL and Redis on loopback.

kwok runs no containers, so the pods' command lines are proven one level down: each test sets
up a primary as the pods' recipe says (replication.py: the same flags, the same set-up script,
the same pg_hba line and role, passwords from a Secret the operator's builder generated), starts
a replica with the replicas Deployment's own command line, writes on the primary and reads on
the replica — then connects with the URI of the connection Secret. What differs is only what
the official image provides and a pod gets for free: for PostgreSQL the image's initdb step and
its "host all all all scram-sha-256" line, the listen address and socket directory of a shared
machine, and local ports instead of Services (passed as engine settings, as spec.parameters
would be).
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import glob
import os
import pwd
import shutil
import signal
import subprocess
from collections.abc import Iterator, Mapping
from functools import partial
from pathlib import Path
from typing import Any

import pytest

from database_operator import desired, replication
from database_operator.api.models import Database
from database_operator.engines import Engine, facts
from database_operator.failover import probe
from tests.cluster import wait_for
from tests.controlplane import free_port
from tests.service import service


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


@contextlib.contextmanager
def running(argv: list[str], env: dict[str, str], log: Path, user: str | None) -> Iterator[None]:
    with log.open("wb") as out:
        proc = subprocess.Popen(
            argv, env=env, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, user=user
        )
        try:
            yield
        finally:
            proc.terminate()
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


# --- PostgreSQL ----------------------------------------------------------------------------------


def postgres_bin() -> Path:
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/postgres"))
    assert found, "no PostgreSQL server here: run hack/install-engines.sh"
    return Path(found[-1]).parent


def run_as(user: str = "postgres") -> str | None:
    """postgres refuses to run as root: as root, run it as Debian's postgres user (or an
    engine's own user, as its image would)."""
    return user if os.geteuid() == 0 else None


def owned(path: Path, user: str | None) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    if user:
        entry = pwd.getpwnam(user)
        os.chown(path, entry.pw_uid, entry.pw_gid)
    return path


def initdb(data: Path, env: Mapping[str, str], folder: Path, user: str | None) -> None:
    """The official image's initdb step: the data directory, POSTGRES_USER as the superuser
    with POSTGRES_PASSWORD (the password file in ``folder``), and its "host all all all
    scram-sha-256" line."""
    pwfile = folder / "pw"
    pwfile.write_text(env["POSTGRES_PASSWORD"] + "\n")
    if user:
        shutil.chown(pwfile, user)
    subprocess.run(
        [
            str(postgres_bin() / "initdb"),
            *("-D", str(data), "--username", env["POSTGRES_USER"], "--pwfile", str(pwfile)),
            *("--auth-local=trust", "--auth-host=scram-sha-256"),
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


def test_postgres_streams_from_the_primary_to_a_hot_standby_replica(tmp_shared: Path) -> None:
    db = make_db("postgres")
    credentials = generated_credentials(db)
    env = container_env(db, credentials)
    user = run_as()
    bindir = postgres_bin()
    path = f"{bindir}:{os.environ['PATH']}"
    sockets = owned(tmp_shared / "sockets", user)
    # What a shared test machine needs instead of a pod's own network and /var/run/postgresql.
    local = ["-c", "listen_addresses=127.0.0.1", "-c", f"unix_socket_directories={sockets}"]
    primary_port, replica_port = free_port(), free_port()
    primary_data = owned(tmp_shared / "primary", user) / "pgdata"

    # What the official image's entrypoint does on a first start: initdb as POSTGRES_USER with
    # POSTGRES_PASSWORD, host access by password, a database named after the user.
    initdb(primary_data, env, tmp_shared, user)

    recipe = replication.primary(
        Engine.POSTGRES, port=primary_port, data_dir=str(primary_data), settings=local
    )
    # The container's env; PGDATA where this machine keeps the data.
    primary_env = env | recipe.env | {"PATH": path, "PGDATA": str(primary_data)}
    assert recipe.args[0] == "postgres"
    with running(
        [str(bindir / "postgres"), "-D", str(primary_data), *recipe.args[1:]],
        primary_env,
        tmp_shared / "primary.log",
        user,
    ):
        superuser = env["POSTGRES_USER"]
        wait_for(
            lambda: answers_db(primary_port, env["POSTGRES_PASSWORD"], superuser),
            what="the primary to answer",
        )
        psql(primary_port, env["POSTGRES_PASSWORD"], superuser, "CREATE DATABASE app", "postgres")
        # The primary container's postStart hook, as it runs there.
        assert recipe.post_start is not None
        subprocess.run(recipe.post_start, env=primary_env, check=True, user=user, timeout=60)
        hba = (primary_data / "pg_hba.conf").read_text().splitlines()
        assert hba.count(replication.PG_HBA_REPLICATION) == 1
        # Idempotent: a restart runs it again.
        subprocess.run(recipe.post_start, env=primary_env, check=True, user=user, timeout=60)
        assert (primary_data / "pg_hba.conf").read_text().splitlines() == hba

        write = env["POSTGRES_PASSWORD"]
        psql(primary_port, write, superuser, "CREATE TABLE orders (id int, item text)")
        psql(primary_port, write, superuser, "INSERT INTO orders VALUES (1, 'before the replica')")

        replica = replication.replica(
            Engine.POSTGRES,
            port=replica_port,
            data_dir="unused",
            primary_host="127.0.0.1",
            primary_port=primary_port,
            settings=local,
        )
        assert replica.command is not None
        replica_data = owned(tmp_shared / "replica", user) / "pgdata"
        replica_env = env | replica.env | {"PATH": path, "PGDATA": str(replica_data)}
        with running(replica.command, replica_env, tmp_shared / "replica.log", user):
            wait_for(
                lambda: answers(replica_port, write, superuser, "SELECT item FROM orders"),
                timeout=60,
                what="the replica to serve what the primary had",
            )
            assert psql(replica_port, write, superuser, "SELECT pg_is_in_recovery()") == "t"
            psql(primary_port, write, superuser, "INSERT INTO orders VALUES (2, 'streamed')")
            wait_for(
                lambda: (
                    answers(replica_port, write, superuser, "SELECT count(*) FROM orders") == "2"
                ),
                what="a write on the primary to stream to the replica",
            )
            with pytest.raises(RuntimeError, match="read-only"):
                psql(replica_port, write, superuser, "INSERT INTO orders VALUES (3, 'no')")
            # An application connects with the connection Secret's URIs.
            entries = desired.connection_entries(db, encoded(credentials))
            uri = entries["uri"].replace("shop.prod.svc:5432", f"127.0.0.1:{primary_port}")
            ro_uri = entries["read-only-uri"].replace(
                "shop-replicas.prod.svc:5432", f"127.0.0.1:{replica_port}"
            )
            for url, expected in ((uri, "f"), (ro_uri, "t")):
                done = subprocess.run(
                    ["psql", "-X", "-A", "-t", url, "-c", "SELECT pg_is_in_recovery()"],
                    capture_output=True,
                    text=True,
                    check=True,
                )
                assert done.stdout.strip() == expected


def answers_db(port: int, password: str, user: str) -> str | None:
    """The primary answers (on the postgres database, before "app" exists)."""
    try:
        return psql(port, password, user, "SELECT 1", "postgres")
    except RuntimeError:
        return None


def encoded(values: dict[str, str]) -> dict[str, Any]:
    return {k: base64.b64encode(v.encode()).decode() for k, v in values.items()}


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


def test_redis_replicates_to_a_read_only_replica(tmp_path: Path) -> None:
    db = make_db("redis")
    credentials = generated_credentials(db)
    env = container_env(db, credentials)
    password = env["REDIS_PASSWORD"]
    primary_port, replica_port = free_port(), free_port()
    local = ["--bind", "127.0.0.1", "--save", ""]

    primary = replication.primary(
        Engine.REDIS, port=primary_port, data_dir=str(tmp_path), settings=local
    )
    replica = replication.replica(
        Engine.REDIS,
        port=replica_port,
        data_dir=str(tmp_path / "replica"),
        primary_host="127.0.0.1",
        primary_port=primary_port,
        settings=local,
    )
    assert primary.command is not None
    assert password not in " ".join(primary.command), "the recipe holds a reference, not the value"
    (tmp_path / "replica").mkdir()
    with running(*redis_server(primary, env, tmp_path), tmp_path / "primary.log", None):
        wait_for(lambda: ping(primary_port, password), what="the primary")
        redis_cli(primary_port, password, "SET", "order:1", "before the replica")
        with running(*redis_server(replica, env, tmp_path), tmp_path / "replica.log", None):
            wait_for(
                lambda: get(replica_port, password, "order:1") == "before the replica",
                timeout=30,
                what="the replica to have the primary's data",
            )
            redis_cli(primary_port, password, "SET", "order:2", "streamed")
            wait_for(lambda: get(replica_port, password, "order:2") == "streamed", what="a write")
            refused = redis_cli(replica_port, password, "SET", "order:3", "no")
            assert refused.startswith("READONLY"), refused
            # Without the password the replica lets nobody in either.
            assert "NOAUTH" in redis_cli(replica_port, "", "GET", "order:1")
            entries = desired.connection_entries(db, encoded(credentials))
            for key, port in (("uri", primary_port), ("read-only-uri", replica_port)):
                url = entries[key].rsplit("@", 1)[0] + f"@127.0.0.1:{port}/0"
                done = subprocess.run(
                    ["redis-cli", "-u", url, "--no-auth-warning", "GET", "order:2"],
                    capture_output=True,
                    text=True,
                    check=True,
                )
                assert done.stdout.strip() == "streamed"


def ping(port: int, password: str) -> bool:
    try:
        return redis_cli(port, password, "PING") == "PONG"
    except subprocess.CalledProcessError:
        return False


def get(port: int, password: str, key: str) -> str | None:
    try:
        return redis_cli(port, password, "GET", key)
    except subprocess.CalledProcessError:
        return None


# --- PostgreSQL instances that fail over (spec.failover) -----------------------------------------


def start(
    argv: list[str], env: dict[str, str], log: Path, user: str | None, cwd: Path | None = None
) -> subprocess.Popen[bytes]:
    """A server started in the background (in ``cwd``: an entry point run as root gives what
    its working directory holds to the engine's user)."""
    with log.open("ab") as out:
        return subprocess.Popen(
            argv,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            user=user,
            cwd=cwd,
        )


def stop(proc: subprocess.Popen[bytes], sig: int = signal.SIGINT) -> None:
    """Stop a server: SIGINT is PostgreSQL's fast shutdown (the image's stop signal), SIGKILL a
    crash."""
    if proc.poll() is None:
        proc.send_signal(sig)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def test_postgres_instances_fail_over_and_the_old_primary_rewinds_to_a_standby(  # noqa: PLR0915
    tmp_shared: Path,
) -> None:
    """The instance recipe, run as the pods run it, around a Service (a proxy on loopback):
    the first instance initialises as the target primary with the image's entry point, the
    second clones it; the primary crashes, the standby is promoted (probe.promote, as the
    operator does), and the old primary, started again with the new target, rewinds onto the
    new timeline and follows as a standby — with what was written on the new primary."""
    db = make_db("postgres", failover={"enabled": True})
    credentials = generated_credentials(db)
    env = container_env(db, credentials)
    user = run_as()
    entrypoint = Path(__file__).parents[2] / "hack" / "images" / "postgresql"
    path = f"{postgres_bin()}:{entrypoint}:{os.environ['PATH']}"
    local = ["-c", "listen_addresses=127.0.0.1"]
    ports = {"shop-1": free_port(), "shop-2": free_port()}
    superuser, password = env["POSTGRES_USER"], env["POSTGRES_PASSWORD"]
    login = probe.Credentials(superuser, password)

    def instance_env(name: str, target: str, primary_port: int) -> dict[str, str]:
        # The volume's root (its lock), and PGDATA a folder in it, as in the pods.
        volume = owned(tmp_shared / name, user)
        recipe = replication.instance(
            Engine.POSTGRES,
            name=name,
            port=ports[name],
            data_dir=str(volume),
            primary_host="127.0.0.1",
            primary_port=primary_port,
            settings=local,
        )
        pgdata = str(volume / "pgdata")
        return env | recipe.env | {"PATH": path, "PGDATA": pgdata, "TARGET_PRIMARY": target}

    def argv_recipe(name: str) -> replication.Recipe:
        return replication.instance(
            Engine.POSTGRES,
            name=name,
            port=0,
            data_dir="unused",
            primary_host="",
            primary_port=0,
            settings=local,
        )

    def argv(name: str) -> list[str]:
        command = argv_recipe(name).command
        assert command is not None
        return command

    def ask(name: str) -> probe.EngineState | None:
        return asyncio.run(probe.ask(Engine.POSTGRES, "127.0.0.1", ports[name], login))

    def rows(name: str) -> str | None:
        return answers(
            ports[name], password, superuser, "SELECT string_agg(item, ',' ORDER BY id) FROM orders"
        )

    with service(ports["shop-1"]) as primary_service:
        first_env = instance_env("shop-1", "shop-1", primary_service.port)
        first = start(argv("shop-1"), first_env, tmp_shared / "shop-1.log", user)
        second = None
        try:
            wait_for(lambda: ask("shop-1") or None, timeout=60, what="the first instance")
            state = ask("shop-1")
            assert state is not None and not state.standby
            post_start = argv_recipe("shop-1").post_start
            assert post_start is not None
            subprocess.run(post_start, env=first_env, check=True, user=user, timeout=60)
            psql(
                ports["shop-1"],
                password,
                superuser,
                "CREATE TABLE orders (id int, item text)",
                superuser,
            )
            psql(
                ports["shop-1"],
                password,
                superuser,
                "INSERT INTO orders VALUES (1, 'one')",
                superuser,
            )

            second_env = instance_env("shop-2", "shop-1", primary_service.port)
            second = start(argv("shop-2"), second_env, tmp_shared / "shop-2.log", user)
            wait_for(lambda: ask("shop-2") or None, timeout=60, what="the second instance to clone")
            state = ask("shop-2")
            assert state is not None and state.standby
            # Its postStart hook writes nothing on a standby, and fails nothing.
            subprocess.run(post_start, env=second_env, check=True, user=user, timeout=60)
            psql(
                ports["shop-1"],
                password,
                superuser,
                "INSERT INTO orders VALUES (2, 'two')",
                superuser,
            )
            wait_for(
                lambda: (
                    answers(ports["shop-2"], password, superuser, "SELECT count(*) FROM orders")
                    == "2"
                ),
                what="streaming",
            )

            # The primary crashes; the standby is promoted; the Service follows it.
            stop(first, signal.SIGKILL)
            primary_service.route(None)
            assert asyncio.run(probe.promote(Engine.POSTGRES, "127.0.0.1", ports["shop-2"], login))
            state = ask("shop-2")
            assert state is not None and not state.standby
            primary_service.route(ports["shop-2"])
            psql(
                ports["shop-2"],
                password,
                superuser,
                "INSERT INTO orders VALUES (3, 'three')",
                superuser,
            )

            # The old primary starts again, now told the target is shop-2: it rewinds, follows.
            first = start(
                argv("shop-1"),
                instance_env("shop-1", "shop-2", primary_service.port),
                tmp_shared / "shop-1.log",
                user,
            )
            wait_for(
                lambda: rows("shop-1") == "one,two,three",
                timeout=90,
                what="the old primary to rewind and follow",
            )
            rejoined = ask("shop-1")
            assert rejoined is not None and rejoined.standby and rejoined.streaming
            promoted = ask("shop-2")
            assert promoted is not None and rejoined.timeline == promoted.timeline > 1
            with pytest.raises(RuntimeError, match="read-only"):
                psql(
                    ports["shop-1"],
                    password,
                    superuser,
                    "INSERT INTO orders VALUES (4, 'no')",
                    superuser,
                )
        finally:
            stop(first)
            if second is not None:
                stop(second)


def test_redis_instances_fail_over_and_a_replica_of_a_frozen_master_follows_the_new_one(
    tmp_shared: Path,
) -> None:
    """The Redis instance recipe around a Service: shop-1 the master, shop-2 and shop-3 its
    replicas; shop-1 frozen (SIGSTOP: its links stay up, as a node that stopped answering
    leaves them), shop-2 promoted (probe.promote), the Service moved, shop-3 told to follow
    again (probe.follow_again) — it has the new master's writes long before its 60 s
    replication timeout; shop-1 started again with the new target is a replica with them too."""
    db = make_db("redis", failover={"enabled": True})
    env = container_env(db, generated_credentials(db))
    password = env["REDIS_PASSWORD"]
    login = probe.Credentials("", password)
    entrypoint = Path(__file__).parents[2] / "hack" / "images" / "redis"
    path = f"{entrypoint}:{os.environ['PATH']}"
    names = ("shop-1", "shop-2", "shop-3")
    ports = {name: free_port() for name in names}
    user = run_as("redis")

    def ask(name: str) -> probe.EngineState | None:
        return asyncio.run(probe.ask(Engine.REDIS, "127.0.0.1", ports[name], login))

    def holds(name: str, key: str, value: str) -> bool:
        return get(ports[name], password, key) == value

    def launch(name: str, target: str, service_port: int) -> subprocess.Popen[bytes]:
        data = owned(tmp_shared / name, user)
        recipe = replication.instance(
            Engine.REDIS,
            name=name,
            port=ports[name],
            data_dir=str(data),
            primary_host="127.0.0.1",
            primary_port=service_port,
            settings=["--bind", "127.0.0.1", "--save", ""],
        )
        assert recipe.command is not None
        assert password not in " ".join(recipe.command), "a reference, not the value"
        container = env | recipe.env | {"PATH": path, "TARGET_PRIMARY": target}
        argv = [replication.expand(arg, container) for arg in recipe.command]
        return start(argv, container, tmp_shared / f"{name}.log", None, cwd=data)

    with service(ports["shop-1"]) as primary_service:
        running_now = {name: launch(name, "shop-1", primary_service.port) for name in names}
        try:
            wait_for(lambda: ping(ports["shop-1"], password), what="the master")
            redis_cli(ports["shop-1"], password, "SET", "order:1", "one")
            for name in ("shop-2", "shop-3"):
                wait_for(partial(holds, name, "order:1", "one"), timeout=30, what=f"{name} synced")
            state = ask("shop-3")
            assert state is not None and state.standby and state.streaming

            running_now["shop-1"].send_signal(signal.SIGSTOP)
            primary_service.route(None)
            assert asyncio.run(probe.promote(Engine.REDIS, "127.0.0.1", ports["shop-2"], login))
            primary_service.route(ports["shop-2"])
            asyncio.run(probe.follow_again(Engine.REDIS, "127.0.0.1", ports["shop-3"], login))
            redis_cli(ports["shop-2"], password, "SET", "order:2", "two")
            wait_for(
                lambda: get(ports["shop-3"], password, "order:2") == "two",
                timeout=15,
                what="shop-3 to follow the new master",
            )
            promoted = ask("shop-2")
            assert promoted is not None and not promoted.standby

            running_now["shop-1"].send_signal(signal.SIGKILL)
            running_now["shop-1"].wait()
            running_now["shop-1"] = launch("shop-1", "shop-2", primary_service.port)
            wait_for(
                lambda: get(ports["shop-1"], password, "order:2") == "two",
                timeout=30,
                what="the old master to follow",
            )
            rejoined = ask("shop-1")
            assert rejoined is not None and rejoined.standby
            assert redis_cli(ports["shop-1"], password, "SET", "order:3", "no").startswith(
                "READONLY"
            )
        finally:
            for proc in running_now.values():
                proc.send_signal(signal.SIGCONT)
                stop(proc, signal.SIGTERM)
