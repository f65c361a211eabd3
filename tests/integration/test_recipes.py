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
import os
import signal
import subprocess
from functools import partial
from pathlib import Path
from typing import Any

import pytest

from database_operator import desired, replication
from database_operator.engines import POSTGRES_MONITORING_ROLE, Engine
from database_operator.failover import probe
from tests.cluster import wait_for
from tests.controlplane import free_port
from tests.engines import (
    PostgresPrimary,
    answers,
    container_env,
    generated_credentials,
    make_db,
    owned,
    ping,
    postgres_bin,
    psql,
    redis_cli,
    redis_server,
    run_as,
    running,
    streaming_postgres,
)
from tests.service import service

# --- PostgreSQL ----------------------------------------------------------------------------------


def test_postgres_streams_from_the_primary_to_a_hot_standby_replica(tmp_shared: Path) -> None:
    db = make_db("postgres")
    credentials = generated_credentials(db)
    env = container_env(db, credentials)
    superuser, write = env["POSTGRES_USER"], env["POSTGRES_PASSWORD"]

    def before_the_replica(primary: PostgresPrimary) -> None:
        # The primary container's postStart hook has run, as it runs there.
        hba = (primary.data / "pg_hba.conf").read_text().splitlines()
        assert hba.count(replication.PG_HBA_REPLICATION) == 1
        # Idempotent: a restart runs it again.
        assert primary.recipe.post_start is not None
        subprocess.run(
            primary.recipe.post_start, env=primary.env, check=True, user=primary.user, timeout=60
        )
        assert (primary.data / "pg_hba.conf").read_text().splitlines() == hba
        psql(primary.port, write, superuser, "CREATE TABLE orders (id int, item text)")
        psql(primary.port, write, superuser, "INSERT INTO orders VALUES (1, 'before the replica')")

    # What the official image's entrypoint does on a first start (initdb as POSTGRES_USER with
    # POSTGRES_PASSWORD, host access by password, a database named after the user), the
    # primary's recipe, then a replica with the replicas Deployment's own command line.
    with streaming_postgres(env, tmp_shared, before_the_replica) as (primary_port, replica_port):
        wait_for(
            lambda: answers(replica_port, write, superuser, "SELECT item FROM orders"),
            timeout=60,
            what="the replica to serve what the primary had",
        )
        assert psql(replica_port, write, superuser, "SELECT pg_is_in_recovery()") == "t"
        psql(primary_port, write, superuser, "INSERT INTO orders VALUES (2, 'streamed')")
        wait_for(
            lambda: answers(replica_port, write, superuser, "SELECT count(*) FROM orders") == "2",
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


def test_postgres_asks_every_role_but_the_exporters_for_a_password_on_loopback(
    tmp_shared: Path,
) -> None:
    """A data directory initdb made with its defaults, as the official image's entry point did
    before the operator passed POSTGRES_INITDB_ARGS (every role trusted from loopback: any
    container of the pod could be the superuser). After the primary's set-up: the superuser
    needs its password there; the exporter's role needs none, reads statistics, and no table;
    the replica, cloned, has both."""
    db = make_db("postgres", monitoring={"enabled": True})
    credentials = generated_credentials(db)
    env = container_env(db, credentials) | {
        var["name"]: var["value"] for var in desired.monitoring.engine_env(db)
    }
    del env["POSTGRES_INITDB_ARGS"]  # the data directory of an earlier release
    superuser, password = env["POSTGRES_USER"], env["POSTGRES_PASSWORD"]
    monitor = POSTGRES_MONITORING_ROLE
    assert env["MONITORING_ROLE"] == monitor

    def before_the_replica(primary: PostgresPrimary) -> None:
        hba = (primary.data / "pg_hba.conf").read_text().splitlines()
        trusted = [line.split() for line in hba if line.startswith("host") and "trust" in line]
        assert trusted == [
            ["host", "all", monitor, "127.0.0.1/32", "trust"],
            ["host", "all", monitor, "::1/128", "trust"],
        ]
        for wrong in ("", "not-the-password"):
            with pytest.raises(RuntimeError, match="password"):
                psql(primary.port, wrong, superuser, "SELECT 1")
        assert psql(primary.port, password, superuser, "SELECT 1") == "1"
        psql(primary.port, password, superuser, "CREATE TABLE orders (id int, item text)")
        psql(primary.port, password, superuser, "INSERT INTO orders VALUES (1, 'a secret')")
        # The exporter's role: no password, statistics and settings, no superuser, no table.
        assert (
            psql(
                primary.port,
                "",
                monitor,
                "SELECT rolsuper FROM pg_roles WHERE rolname = current_user",
            )
            == "f"
        )
        assert int(psql(primary.port, "", monitor, "SELECT count(*) FROM pg_stat_activity")) > 0
        assert psql(primary.port, "", monitor, "SHOW data_directory") == str(primary.data)
        for sql in ("SELECT item FROM orders", "CREATE TABLE mine (i int)"):
            with pytest.raises(RuntimeError, match="permission denied"):
                psql(primary.port, "", monitor, sql)
        # Idempotent: a restart runs it again and changes nothing.
        assert primary.recipe.post_start is not None
        subprocess.run(
            primary.recipe.post_start, env=primary.env, check=True, user=primary.user, timeout=60
        )
        assert (primary.data / "pg_hba.conf").read_text().splitlines() == hba

    with streaming_postgres(env, tmp_shared, before_the_replica) as (_, replica_port):
        assert psql(replica_port, "", monitor, "SELECT pg_is_in_recovery()") == "t"
        with pytest.raises(RuntimeError, match="password"):
            psql(replica_port, "", superuser, "SELECT 1")


def encoded(values: dict[str, str]) -> dict[str, Any]:
    return {k: base64.b64encode(v.encode()).decode() for k, v in values.items()}


# --- Redis ---------------------------------------------------------------------------------------


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
