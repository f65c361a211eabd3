"""Real databases with their metrics exporters on loopback: what the monitoring tests scrape.

A small fleet of Debian's engines, started as the recipe tests start them (tests/engines.py):
a PostgreSQL primary with one streaming replica (replication.py's recipe), a MariaDB standing in
for MySQL, a Redis primary with one replica. Beside each server
runs Debian's build of the exporter release the pods pin (engines.py), started from the pod
builder's own flags and environment (desired/monitoring.py: `exporter_args`, `exporter_env`),
resolved as the kubelet resolves them: secretKeyRefs from a dict standing for the Database's
credentials Secret, then ``$(VAR)`` references to earlier variables expanded by the kubelet's
rules (`kubelet_expand`). No password is ever on a command line. The Secret holds what the
operator would generate (username ``app``), but with passwords that carry ``@:/$%`` and a
``$(...)`` of their own, so that every DSN and the expansion must cope with them; MariaDB's root
password is the Secret's password, as the official MySQL image sets MYSQL_ROOT_PASSWORD to it.

API, for the monitoring tests (tests/integration/test_exporters.py, test_dashboards.py):

- ``exporter_fleet``: a session-scoped pytest fixture yielding a running `Fleet`; import it into
  the test module (``from tests.exporters import exporter_fleet  # noqa: F401``).
  ``fleet(folder)`` is the same as a context manager, for use outside pytest.
- ``Fleet.targets``: one `Target` per exporter: ``address`` ("127.0.0.1:PORT", /metrics there),
  ``labels`` (the contract's: namespace, pod, database, engine, role, job; what the PodMonitor's
  relabelings produce in a cluster, set here by hand), ``engine``, ``role``, ``log`` (the
  exporter's output), ``engine_port`` (the server it scrapes), ``secret_name``, ``pid``.
- ``Fleet.scrape_config(interval_s)``: a Prometheus ``scrape_configs`` entry with static targets
  carrying those labels (job_name is the contract's job), for ``prometheus_server(folder,
  [configs...])`` (tests/prometheus.py) to scrape.
- ``Fleet.load(rounds)``: a few writes and queries on every primary (counters move, the
  replicas have something to replay); the fleet has had one round when it is yielded.
- ``Fleet.secrets`` (Secret name -> its values) and ``exporter(engine, secrets, secret_name,
  engine_port, log)``, to start another exporter, e.g. with a wrong password.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import socket
import subprocess
import tempfile
import threading
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from database_operator import desired, replication
from database_operator.api.models import Database
from database_operator.desired.common import PRIMARY, REPLICA
from database_operator.desired.monitoring import exporter_args, exporter_env
from database_operator.desired.workload import pod_template
from database_operator.engines import MONITORING_DIR, Engine
from database_operator.manifest import Manifest
from tests.cluster import wait_for
from tests.controlplane import free_port, stop_process
from tests.engines import (
    PostgresPrimary,
    container_env,
    engine_user,
    generated_credentials,
    mariadbd,
    mysql,
    mysql_answers,
    mysql_first_start,
    owned,
    ping,
    psql,
    redis_cli,
    redis_server,
    run_as,
    running,
    streaming_postgres,
)
from tests.prometheus import http_get

#: The contract's job label of every database series.
JOB = "database-operator-databases"
NAMESPACE = "shop"
#: Debian's build of each pinned exporter release.
BINARIES = {
    Engine.POSTGRES: "prometheus-postgres-exporter",
    Engine.MYSQL: "prometheus-mysqld-exporter",
    Engine.REDIS: "prometheus-redis-exporter",
}
#: What a user's own Secret may hold and a DSN must survive: URL and DSN delimiters (a '?'
#: broke mysqld_exporter's DSN), a percent sign, and a ``$(...)`` the kubelet must not expand
#: again once substituted.
AWKWARD = "@:/?$%$(HOME)"

# --- the kubelet's resolution of a container's env and args --------------------------------------


def kubelet_expand(text: str, defined: Mapping[str, str]) -> str:
    """``text`` with ``$(VAR)`` references expanded as the kubelet expands them
    (k8s.io/kubernetes third_party/forked/golang/expansion): a defined VAR is replaced, an
    undefined one is left as written, ``$$`` is one ``$`` (so ``$$(VAR)`` stays literal), an
    unclosed ``$(`` and any other ``$`` are kept. Substituted values are not expanded again."""
    out: list[str] = []
    i = 0
    while i < len(text):
        if text[i] != "$" or i + 1 == len(text):
            out.append(text[i])
            i += 1
            continue
        following = text[i + 1]
        close = text.find(")", i + 2) if following == "(" else -1
        if following == "$":
            out.append("$")
            i += 2
        elif close != -1:
            name = text[i + 2 : close]
            out.append(defined.get(name, f"$({name})"))
            i = close + 1
        else:
            out.append("$" + following)
            i += 2
    return "".join(out)


def kubelet_env(
    env: Sequence[Manifest], secrets: Mapping[str, Mapping[str, str]]
) -> dict[str, str]:
    """A container's ``env`` as the process gets it: secretKeyRefs read from ``secrets`` (Secret
    name -> its decoded data; a missing Secret or key fails, as the pod would not start), plain
    values expanded against the variables defined before them, in order."""
    resolved: dict[str, str] = {}
    for var in env:
        if "valueFrom" in var:
            ref = var["valueFrom"]["secretKeyRef"]
            resolved[var["name"]] = secrets[ref["name"]][ref["key"]]
        else:
            resolved[var["name"]] = kubelet_expand(var.get("value", ""), resolved)
    return resolved


# --- one exporter --------------------------------------------------------------------------------


@dataclass(frozen=True)
class Exporter:
    """A running exporter: where its /metrics is, its process and its output."""

    address: str
    proc: subprocess.Popen[bytes]
    log: Path

    @property
    def url(self) -> str:
        return f"http://{self.address}/metrics"


@contextlib.contextmanager
def exporter(
    engine: Engine,
    secrets: Mapping[str, Mapping[str, str]],
    secret_name: str,
    engine_port: int,
    log: Path,
    *,
    monitoring_dir: Path | None = None,
    env_changes: Mapping[str, str] | None = None,
) -> Iterator[Exporter]:
    """Debian's exporter of ``engine`` with the pod's flags (listening on a free port) and env
    (reading the Secret ``secret_name`` of ``secrets``, scraping 127.0.0.1:``engine_port``),
    serving /metrics when it is yielded. Its env is only what the pod's container sets, as in
    the image (no PATH: the exporters run no other program). ``monitoring_dir``: the pod's
    in-memory volume of an exporter with its own user (the paths of its flags moved there, as
    the mount does); ``env_changes``: what a test changes of the pod's env."""
    binary = shutil.which(BINARIES[engine])
    if binary is None:
        pytest.fail(f"{BINARIES[engine]} is not on PATH: run hack/install-engines.sh")
    port = free_port()
    env = kubelet_env(exporter_env(engine, secret_name, engine_port=engine_port), secrets)
    env |= env_changes or {}
    args = [kubelet_expand(arg, env) for arg in exporter_args(engine, listen_port=port)]
    if monitoring_dir is not None:
        args = [arg.replace(MONITORING_DIR, str(monitoring_dir)) for arg in args]
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [binary, *args], env=env, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL
        )
    running_exporter = Exporter(f"127.0.0.1:{port}", proc, log)
    try:
        wait_for(
            lambda: proc.poll() is not None or http_get(running_exporter.url) is not None,
            what=f"{BINARIES[engine]} to serve /metrics",
        )
        assert proc.poll() is None, f"{binary} exited: {log.read_text(errors='replace')}"
        yield running_exporter
    finally:
        stop_process(proc)


def listener(host: str = "127.0.0.1") -> tuple[int, list[bytes], threading.Thread]:
    """A server on a free port of ``host`` that keeps whatever one client sends it (answering
    nothing, as an attacker's would, while it reads): its port, what came, its thread."""
    server = socket.create_server((host, 0))
    server.settimeout(20)
    received: list[bytes] = []

    def serve() -> None:
        with server:
            try:
                connection, _ = server.accept()
            except TimeoutError:
                return
            with connection:
                connection.settimeout(3)
                with contextlib.suppress(OSError):
                    while chunk := connection.recv(4096):
                        received.append(chunk)

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    return server.getsockname()[1], received, thread


# --- the fleet -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Target:
    """One exporter to scrape, with the labels a PodMonitor gives its series in a cluster."""

    address: str
    labels: dict[str, str]
    engine: Engine
    role: str
    log: Path
    engine_port: int
    secret_name: str
    #: The exporter's process.
    pid: int
    #: The pod's in-memory volume of an exporter with its own user (Redis), else None.
    monitoring_dir: Path | None = None

    @property
    def url(self) -> str:
        return f"http://{self.address}/metrics"


@dataclass
class Fleet:
    """The running servers and their exporters."""

    targets: list[Target]
    #: Left out of the repr: a failing test prints its fixtures.
    secrets: dict[str, dict[str, str]] = field(repr=False)
    folder: Path
    databases: dict[Engine, Database] = field(default_factory=dict, repr=False)
    loaded: int = 0

    def target(self, engine: Engine, role: str = PRIMARY) -> Target:
        return next(t for t in self.targets if t.engine is engine and t.role == role)

    def credentials(self, engine: Engine) -> dict[str, str]:
        return self.secrets[desired.credentials_secret_name(self.databases[engine])]

    def scrape_config(self, interval_s: float = 1) -> dict[str, Any]:
        """One ``scrape_configs`` entry: every exporter as a static target with its labels."""
        return {
            "job_name": JOB,
            "scrape_interval": f"{interval_s}s",
            "scrape_timeout": f"{interval_s}s",
            "static_configs": [
                {"targets": [target.address], "labels": target.labels} for target in self.targets
            ],
        }

    def load(self, rounds: int = 1) -> None:
        """``rounds`` of writes and reads on each primary."""
        pg = self.credentials(Engine.POSTGRES)
        my = self.credentials(Engine.MYSQL)
        redis = self.credentials(Engine.REDIS)
        pg_port = self.target(Engine.POSTGRES).engine_port
        my_port = self.target(Engine.MYSQL).engine_port
        redis_port = self.target(Engine.REDIS).engine_port
        for _ in range(rounds):
            n = self.loaded
            psql(
                pg_port,
                pg["password"],
                pg["username"],
                "INSERT INTO orders (item) SELECT 'item ' || g FROM generate_series(1, 100) g;"
                "SELECT count(*) FROM orders;",
            )
            mysql(
                "INSERT INTO products (name) SELECT table_name FROM information_schema.tables"
                " LIMIT 50; SELECT count(*) FROM products;",
                my["username"],
                my["password"],
                port=my_port,
                database=my["username"],
            )
            keys = [part for i in range(20) for part in (f"session:{n}:{i}", "x" * 64)]
            redis_cli(redis_port, redis["password"], "MSET", *keys)
            redis_cli(redis_port, redis["password"], "GET", f"session:{n}:0")
            self.loaded += 1


def awkward_password() -> str:
    """A password as the operator generates it, with awkward characters in the middle."""
    generated = desired.generate_password()
    return generated[:12] + AWKWARD + generated[12:]


def database(engine: Engine, name: str, replicas: int) -> Database:
    return Database.model_validate(
        {
            "metadata": {"name": name, "namespace": NAMESPACE, "uid": f"uid-{name}"},
            "spec": {"engine": engine.value, "replicas": replicas, "monitoring": {"enabled": True}},
        }
    )


def secret_values(db: Database) -> dict[str, str]:
    """The Secret the operator would generate for ``db`` (username ``app``), with awkward
    passwords."""
    values = generated_credentials(db)
    for key in ("password", "replication-password"):
        if key in values:
            values[key] = awkward_password()
    return values


def pod_labels(db: Database, role: str, pod: str) -> dict[str, str]:
    """The contract's labels of a pod of ``db`` in ``role``: read from the pod template's labels
    as the PodMonitor's relabelings read them."""
    on_pod = pod_template(db, role=role)["metadata"]["labels"]
    return {
        "namespace": NAMESPACE,
        "pod": pod,
        "database": on_pod["app.kubernetes.io/instance"],
        "engine": on_pod["app.kubernetes.io/name"],
        "role": on_pod["databases.example.com/role"],
        "job": JOB,
    }


def pod_name(db: Database, role: str) -> str:
    """A name as the Deployment's ReplicaSet gives its pod."""
    deployment = db.name if role == PRIMARY else f"{db.name}-replicas"
    return f"{deployment}-6f7d9c8b5-{'p' if role == PRIMARY else 'r'}x2k7"


def orders_table(primary: PostgresPrimary) -> None:
    """The table the load writes to, made on the primary before its replica is cloned."""
    superuser, password = primary.env["POSTGRES_USER"], primary.env["POSTGRES_PASSWORD"]
    psql(
        primary.port,
        password,
        superuser,
        "CREATE TABLE orders (id serial PRIMARY KEY, item text)",
        superuser,
    )


@contextlib.contextmanager
def mariadb(env: Mapping[str, str], folder: Path) -> Iterator[int]:
    """MariaDB as the MySQL image's first start leaves it (root's password and the user's are
    the Secret's password, a database named after the user), then serving on a free port."""
    user = engine_user(Engine.MYSQL)
    data = owned(folder / "volume", user) / "mysql"
    socket = folder / "volume" / "mysqld.sock"
    with mysql_first_start(env, data, socket, folder / "first-start.log", user):
        pass
    port = free_port()
    argv = mariadbd(data, socket, f"--port={port}", "--bind-address=127.0.0.1")
    with running(argv, dict(os.environ), folder / "server.log", user):
        username, password = env["MYSQL_USER"], env["MYSQL_PASSWORD"]
        wait_for(lambda: mysql_answers(username, password, port=port), what="MariaDB to answer")
        mysql(
            "CREATE TABLE products (id int AUTO_INCREMENT PRIMARY KEY, name text) ENGINE=InnoDB",
            username,
            password,
            port=port,
            database=env["MYSQL_DATABASE"],
        )
        yield port


def monitoring_credentials(db: Database, folder: Path, port: int) -> tuple[Path, dict[str, str]]:
    """What the pod's init container makes for an exporter with its own user, run for real in
    ``folder`` (for the server on ``port``), and the engine's env that names it; as the mount
    does, MONITORING_DIR is ``folder``."""
    init = desired.monitoring.credentials_init_container(db, "unused")
    assert init is not None
    argv = [str(folder) if arg == MONITORING_DIR else arg for arg in init["command"]]
    argv[-1] = str(port)
    folder.mkdir(mode=0o700)
    subprocess.run(argv, check=True, timeout=30, capture_output=True)
    env = {
        var["name"]: var["value"].replace(MONITORING_DIR, str(folder))
        for var in desired.monitoring.engine_env(db)
    }
    return folder, env


@contextlib.contextmanager
def redis(
    db: Database, env: Mapping[str, str], folder: Path
) -> Iterator[tuple[tuple[int, Path], tuple[int, Path]]]:
    """A Redis primary and a replica of it (replication.py's arguments), each with its
    exporter's user; their ports and monitoring folders."""
    password = env["REDIS_PASSWORD"]
    primary_port, replica_port = free_port(), free_port()
    local = ["--bind", "127.0.0.1", "--save", ""]
    primary_watch, primary_env = monitoring_credentials(
        db, folder / "primary-monitoring", primary_port
    )
    replica_watch, replica_env = monitoring_credentials(
        db, folder / "replica-monitoring", replica_port
    )

    primary = replication.primary(
        Engine.REDIS, port=primary_port, data_dir=str(folder), settings=local
    )
    replica_dir = folder / "replica"
    replica_dir.mkdir()
    replica = replication.replica(
        Engine.REDIS,
        port=replica_port,
        data_dir=str(replica_dir),
        primary_host="127.0.0.1",
        primary_port=primary_port,
        settings=local,
    )
    with running(
        *redis_server(primary, {**env, **primary_env}, folder), folder / "primary.log", None
    ):
        wait_for(lambda: ping(primary_port, password), what="the Redis primary")
        with running(
            *redis_server(replica, {**env, **replica_env}, folder), folder / "replica.log", None
        ):
            wait_for(
                lambda: "master_link_status:up" in redis_info(replica_port, password),
                timeout=30,
                what="the Redis replica to sync",
            )
            yield (primary_port, primary_watch), (replica_port, replica_watch)


def redis_info(port: int, password: str) -> str:
    """INFO replication, or "" while the server does not answer."""
    try:
        return redis_cli(port, password, "INFO", "replication")
    except subprocess.CalledProcessError:
        return ""


@contextlib.contextmanager
def fleet(folder: Path) -> Iterator[Fleet]:
    """The fleet, its exporters serving, one round of load done, in ``folder`` (which the
    engines' users must be able to enter)."""
    dbs = {
        Engine.POSTGRES: database(Engine.POSTGRES, "ledger", replicas=2),
        Engine.MYSQL: database(Engine.MYSQL, "catalog", replicas=1),
        Engine.REDIS: database(Engine.REDIS, "sessions", replicas=2),
    }
    secrets = {desired.credentials_secret_name(db): secret_values(db) for db in dbs.values()}
    servers: dict[tuple[Engine, str], int] = {}
    monitoring_dirs: dict[tuple[Engine, str], Path] = {}
    with contextlib.ExitStack() as stack:
        for engine, db in dbs.items():
            env = container_env(db, secrets[desired.credentials_secret_name(db)])
            where = owned(folder / engine.value, run_as())
            if engine is Engine.POSTGRES:
                # The role its exporter logs in as, which the primary's set-up makes.
                env |= {var["name"]: var["value"] for var in desired.monitoring.engine_env(db)}
                servers[engine, PRIMARY], servers[engine, REPLICA] = stack.enter_context(
                    streaming_postgres(env, where, orders_table)
                )
            elif engine is Engine.MYSQL:
                servers[engine, PRIMARY] = stack.enter_context(mariadb(env, where))
            else:
                for role, (port, made) in zip(
                    (PRIMARY, REPLICA), stack.enter_context(redis(db, env, where)), strict=True
                ):
                    servers[engine, role], monitoring_dirs[engine, role] = port, made
        targets = []
        for (engine, role), engine_port in servers.items():
            db = dbs[engine]
            secret_name = desired.credentials_secret_name(db)
            pod = pod_name(db, role)
            log = folder / f"{pod}.exporter.log"
            monitoring_dir = monitoring_dirs.get((engine, role))
            started = stack.enter_context(
                exporter(
                    engine, secrets, secret_name, engine_port, log, monitoring_dir=monitoring_dir
                )
            )
            labels = pod_labels(db, role, pod)
            targets.append(
                Target(
                    started.address,
                    labels,
                    engine,
                    role,
                    started.log,
                    engine_port,
                    secret_name,
                    started.proc.pid,
                    monitoring_dir,
                )
            )
        running_fleet = Fleet(targets, secrets, folder, dbs)
        running_fleet.load()
        yield running_fleet


@pytest.fixture(scope="session")
def exporter_fleet() -> Iterator[Fleet]:
    """The fleet for the whole session, in a folder of /tmp the engines' users can enter."""
    folder = Path(tempfile.mkdtemp(prefix="exporters-", dir="/tmp"))
    folder.chmod(0o755)
    try:
        with fleet(folder) as running_fleet:
            yield running_fleet
    finally:
        shutil.rmtree(folder, ignore_errors=True)


# --- reading an exposition -----------------------------------------------------------------------


def series(text: str) -> dict[str, list[tuple[dict[str, str], float]]]:
    """An exposition's samples by metric name: (labels, value) each."""
    found: dict[str, list[tuple[dict[str, str], float]]] = {}
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        matched = _SAMPLE.match(line)
        assert matched, f"not a sample line: {line!r}"
        labels = dict(_LABEL.findall(matched["labels"] or ""))
        found.setdefault(matched["name"], []).append((labels, float(matched["value"])))
    return found


_SAMPLE = re.compile(r"^(?P<name>[a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(?P<labels>.*)\})? (?P<value>\S+)")
_LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"')
