"""The backup and restore recipes, run for real: Debian's own PostgreSQL, MariaDB (standing in
for MySQL) and Redis on loopback, and a real S3 store (SeaweedFS, tests/objectstore.py).

A backup counts only when it was restored and the data compared. So each test writes rows,
takes the backup through the backup Job's own containers, restores it through the restore Job's
containers into a fresh instance, and compares counts and checksums with the source.

The Jobs are built by the operator's pure builders (backups/jobs.py) and run by `Pod` below:
each container's command, args and env come from the built manifest, secretKeyRefs are resolved
from the values the test holds (the Database's generated credentials, the store's keys), and the
agent runs as `python -m database_operator.cli agent`, as `database-operator agent` runs in the
operator's image. What differs is only what a shared test machine must: the pod's volumes are
folders (the manifest's mount paths are mapped to them), the Service is 127.0.0.1 on a free port,
the agent writes its termination message to a file of the test's. PostgreSQL's and MySQL's
restore containers end by exec'ing their image's ``docker-entrypoint.sh``, which this machine
lacks: a stand-in records how it was called, and the test does what that entrypoint does on a
first start (initialise, a temporary socket-only server, users and database, then source the
scripts in ``/docker-entrypoint-initdb.d``: the restore's loader), before the server starts as
the Database's first pod would start it.

Run with ``-s`` to see the figures: each engine's data size, its backup's size, and how long
the backup (dump + upload) and the restore (fetch + load) took.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import pytest

from database_operator import desired, replication
from database_operator.api.backup import (
    ACCESS_KEY_ID,
    SECRET_ACCESS_KEY,
    BackupDestination,
    DatabaseBackup,
)
from database_operator.api.models import Database
from database_operator.backups import jobs, recipes, state
from database_operator.backups.encryption import key_id
from database_operator.desired.workload import settings
from database_operator.engines import Engine, facts
from database_operator.manifest import Manifest
from tests.cluster import wait_for
from tests.controlplane import free_port
from tests.integration.test_recipes import (
    PSQL,
    answers_db,
    container_env,
    generated_credentials,
    initdb,
    make_db,
    owned,
    ping,
    postgres_bin,
    psql,
    redis_cli,
    redis_server,
    run_as,
    running,
)

if TYPE_CHECKING:
    from tests.objectstore import ObjectStore

AGENT_IMAGE = "registry.example.com/database-operator:test"
JOB_OPTIONS = jobs.JobOptions(agent_image=AGENT_IMAGE)
#: The Secret with the store's keys (the destination's credentialsSecretRef).
S3_SECRET = "backup-store"
BACKUP = "shop-now"
MB = 1_000_000
#: Each Job container gets this long.
CONTAINER_TIMEOUT_S = 300
#: How the image's entrypoint sources a *.sh file of /docker-entrypoint-initdb.d (not
#: executable: the restore container writes it with printf): in its own shell, under its flags.
#: POSIX sh, not the official images' bash: an image's entrypoint may be either, and the loaders
#: must work under both (MySQL's once began with bash's `set -o pipefail`).
SOURCE_INIT_SCRIPT = ["sh", "-c", 'set -e; . "$0"']


# --- a built Job, run on this machine ------------------------------------------------------------


@dataclass(frozen=True)
class Local:
    """What this machine puts in place of a pod's own: ``substitutes`` replace env values the
    manifest sets (and must set); ``provided`` is what the image or its entrypoint would add;
    ``path`` the tools' PATH; ``user`` who runs the container (an engine's image runs as its
    own non-root user)."""

    substitutes: Mapping[str, str] = field(default_factory=dict)
    provided: Mapping[str, str] = field(default_factory=dict)
    path: str | None = None
    user: str | None = None


@dataclass(frozen=True)
class Ran:
    """One container's run: exit status, output, wall time, and the agent's result."""

    container: str
    returncode: int
    stdout: str
    stderr: str
    seconds: float
    result: dict[str, Any] | None


def on_host(text: str, mounts: Mapping[str, Path]) -> str:
    """``text`` with each mount path (a whole path component) replaced by its folder here."""
    if not mounts:
        return text
    paths = "|".join(re.escape(mount) for mount in sorted(mounts, key=len, reverse=True))
    return re.sub(rf"(?<![\w./-])(?:{paths})(?![\w.-])", lambda found: str(mounts[found[0]]), text)


class Pod:
    """A built Job's pod on this machine: its volumes are folders (given ones, e.g. a claim, or
    fresh ones in ``folder`` owned by ``owner``), its containers run in order as the kubelet runs
    a Job's pod: init containers first, and the first that fails ends the pod."""

    def __init__(
        self,
        job: Manifest,
        folder: Path,
        secrets: Mapping[str, Mapping[str, str]],
        *,
        volumes: Mapping[str, Path] | None = None,
        owner: str | None = None,
    ) -> None:
        spec = job["spec"]["template"]["spec"]
        self.containers: dict[str, Manifest] = {
            c["name"]: c for c in [*spec.get("initContainers", []), *spec["containers"]]
        }
        self.folder = owned(folder, owner)
        self.home = owned(folder / "home", owner)
        self.secrets = secrets
        given = volumes or {}
        self.volumes = {
            volume["name"]: given.get(volume["name"]) or owned(folder / volume["name"], owner)
            for volume in spec.get("volumes", [])
        }
        for volume in spec.get("volumes", []):  # a Secret's volume: its keys as files
            if "secret" in volume and volume["name"] not in given:
                data = secrets[volume["secret"]["secretName"]]
                items = volume["secret"].get("items") or [{"key": k, "path": k} for k in data]
                for item in items:
                    (self.volumes[volume["name"]] / item["path"]).write_text(data[item["key"]])

    def mounts(self, name: str) -> dict[str, Path]:
        return {
            m["mountPath"]: self.volumes[m["name"]]
            for m in self.containers[name].get("volumeMounts", [])
        }

    def env(self, name: str, substitutes: Mapping[str, str] | None = None) -> dict[str, str]:
        """The container's env as the kubelet resolves it (secretKeyRefs from the test's
        values; an optional key that is missing is left out), mount paths mapped."""
        mounts = self.mounts(name)
        resolved: dict[str, str] = {}
        for var in self.containers[name].get("env", []):
            if "value" in var:
                resolved[var["name"]] = on_host(var["value"], mounts)
                continue
            ref = var["valueFrom"]["secretKeyRef"]
            value = self.secrets.get(ref["name"], {}).get(ref["key"])
            if value is None:
                assert ref.get("optional"), f"Secret {ref['name']} has no key {ref['key']}"
                continue
            resolved[var["name"]] = value
        unknown = set(substitutes or {}) - set(resolved)
        assert not unknown, f"{name} sets no {unknown}: nothing to substitute"
        return resolved | dict(substitutes or {})

    def environment(self, name: str, local: Local) -> dict[str, str]:
        """Everything the container's processes see."""
        base = {"PATH": local.path or os.environ["PATH"], "HOME": str(self.home)}
        return base | self.env(name, local.substitutes) | dict(local.provided)

    def result_file(self, name: str) -> Path:
        return self.folder / f"{name}.termination-log"

    def argv(self, name: str) -> list[str]:
        container = self.containers[name]
        mounts = self.mounts(name)
        argv = [on_host(arg, mounts) for arg in [*container["command"], *container.get("args", [])]]
        agent = jobs.AGENT_COMMAND
        if argv[: len(agent)] == agent:
            # The operator image's `database-operator agent`; its termination message in a file
            # of this pod's (the kubelet's /dev/termination-log is no test's to write).
            result = f"--result-file={self.result_file(name)}"
            return [sys.executable, "-m", "database_operator.cli", "agent", result, *argv[2:]]
        return argv

    def run(self, name: str, local: Local | None = None) -> Ran:
        local = local or Local()
        result_file = self.result_file(name)
        result_file.unlink(missing_ok=True)
        started = time.monotonic()
        done = subprocess.run(
            self.argv(name),
            env=self.environment(name, local),
            cwd=self.home,
            capture_output=True,
            text=True,
            user=local.user,
            timeout=CONTAINER_TIMEOUT_S,
            check=False,
        )
        seconds = time.monotonic() - started
        result = json.loads(result_file.read_text()) if result_file.exists() else None
        return Ran(name, done.returncode, done.stdout, done.stderr, seconds, result)

    def run_all(self, locals_: Mapping[str, Local] | None = None) -> list[Ran]:
        """Every container in order, until one fails (its Ran is the last)."""
        ran: list[Ran] = []
        for name in self.containers:
            ran.append(self.run(name, (locals_ or {}).get(name)))
            if ran[-1].returncode != 0:
                break
        return ran


def succeeded(ran: Sequence[Ran], pod: Pod) -> dict[str, Ran]:
    """The runs by container, after checking that every container ran and exited 0."""
    for one in ran:
        assert one.returncode == 0, f"{one.container} exited {one.returncode}: {one.stderr[-3000:]}"
    assert [one.container for one in ran] == list(pod.containers)
    return {one.container: one for one in ran}


def figures(engine: str, **values: str) -> None:
    """One line of measurements (pytest -s shows it)."""
    print(
        f"\n[figures] {engine}: "
        + "; ".join(f"{k.replace('_', ' ')} {v}" for k, v in values.items())
    )


# --- Databases, backups and where they are stored ------------------------------------------------


@pytest.fixture
def bucket(object_store: ObjectStore) -> str:
    """A fresh bucket for one test."""
    name = f"b-{uuid.uuid4().hex[:12]}"
    object_store.create_bucket(name)
    return name


#: The Secret with the backups' client-side encryption key (base64, as openssl writes it).
KEY_SECRET = "backup-key"
ENCRYPTION_KEY = base64.b64encode(os.urandom(32)).decode() + "\n"


def encrypted(destination: dict[str, Any]) -> dict[str, Any]:
    return destination | {"encryption": {"keySecretRef": {"name": KEY_SECRET}}}


def s3_destination(object_store: ObjectStore, bucket: str) -> dict[str, Any]:
    return {
        "s3": {
            "endpoint": object_store.endpoint,
            "insecure": True,  # SeaweedFS on loopback, without TLS
            "bucket": bucket,
            "path": "recipes",
            "credentialsSecretRef": {"name": S3_SECRET},
        }
    }


def store_keys(object_store: ObjectStore) -> dict[str, str]:
    return {ACCESS_KEY_ID: object_store.access_key, SECRET_ACCESS_KEY: object_store.secret_key}


def database(
    engine: Engine, destination: Mapping[str, Any], name: str = "shop", **spec: Any
) -> Database:
    """A single-instance Database with a volume, its backups going to ``destination``."""
    return make_db(
        engine.value,
        name,
        replicas=1,
        storage={"size": "1Gi"},
        backup={"destination": destination},
        **spec,
    )


def database_backup(db: Database, name: str = BACKUP) -> DatabaseBackup:
    return DatabaseBackup.model_validate(
        {
            "metadata": {"name": name, "namespace": db.namespace, "uid": "b-1"},
            "spec": {"database": db.name},
        }
    )


def destination_of(db: Database) -> BackupDestination:
    assert db.spec.backup is not None
    return db.spec.backup.destination


def location_of(db: Database, backup: DatabaseBackup) -> str:
    """Where the operator stores ``backup`` (its own function)."""
    destination = destination_of(db)
    extension = recipes.EXTENSIONS[db.spec.engine]
    return state.location(state.destination_prefix(destination), backup, extension)


def secrets_of(
    db: Database, credentials: Mapping[str, str], store: Mapping[str, str]
) -> dict[str, dict[str, str]]:
    """The Secrets the Jobs reference: the Database's credentials, the store's keys and the
    backups' encryption key."""
    return {
        desired.credentials_secret_name(db): dict(credentials),
        S3_SECRET: dict(store),
        KEY_SECRET: {"key": ENCRYPTION_KEY},
    }


@dataclass(frozen=True)
class Backup:
    """A backup taken by the backup Job: where, what the agent recorded, and how long."""

    db: Database
    backup: DatabaseBackup
    location: str
    result: dict[str, Any]
    dump_seconds: float
    upload_seconds: float

    @property
    def seconds(self) -> float:
        return self.dump_seconds + self.upload_seconds

    @property
    def sha256(self) -> str:
        return str(self.result["sha256"])


def take_backup(
    db: Database,
    secrets: Mapping[str, Mapping[str, str]],
    port: int,
    folder: Path,
    *,
    path: str | None = None,
    volumes: Mapping[str, Path] | None = None,
) -> Backup:
    """Run the backup Job of ``db`` (serving on 127.0.0.1:``port``): dump, then upload."""
    backup = database_backup(db)
    location = location_of(db, backup)
    job = jobs.backup_job(backup, db, destination_of(db), location, JOB_OPTIONS)
    user = engine_user(db.spec.engine)
    pod = Pod(job, folder, secrets, volumes=volumes, owner=user)
    service = {"DB_HOST": "127.0.0.1", "DB_PORT": str(port)}
    ran = succeeded(pod.run_all({"dump": Local(service, path=path, user=user)}), pod)
    result = ran["upload"].result
    assert result is not None and result["location"] == location, ran["upload"].stdout
    return Backup(db, backup, location, result, ran["dump"].seconds, ran["upload"].seconds)


def engine_user(engine: Engine) -> str | None:
    """The user an engine's image runs as (here: Debian's user of that engine)."""
    return run_as(
        {Engine.POSTGRES: "postgres", Engine.MYSQL: "mysql", Engine.REDIS: "redis"}[engine]
    )


def restore_pod(
    target: Database,
    taken: Backup,
    secrets: Mapping[str, Mapping[str, str]],
    folder: Path,
    *,
    sha256: str | None = None,
    volumes: Mapping[str, Path] | None = None,
) -> Pod:
    """The restore Job of ``target`` from ``taken`` (checked against ``sha256``, as recorded
    by its DatabaseBackup), as a pod here; its ``data`` volume is a fresh empty folder."""
    job = jobs.restore_job(
        target, destination_of(target), taken.location, sha256 or taken.sha256, JOB_OPTIONS
    )
    return Pod(job, folder, secrets, volumes=volumes, owner=engine_user(target.spec.engine))


@dataclass(frozen=True)
class StandIn:
    """The image's ``docker-entrypoint.sh``, which this machine lacks: it records its
    arguments (the restore container's exec) and does nothing else; the test does the rest."""

    bin: Path
    called: Path

    @classmethod
    def create(cls, folder: Path, user: str | None) -> StandIn:
        bin_ = owned(folder / "image-bin", user)
        called = folder / "entrypoint-called"
        script = bin_ / "docker-entrypoint.sh"
        script.write_text(f"#!/bin/sh\nprintf '%s\\n' \"$@\" > {called}\n")
        script.chmod(0o755)
        owned(folder, user)
        return cls(bin_, called)

    def path(self, *before: Path) -> str:
        return ":".join([str(self.bin), *map(str, before), os.environ["PATH"]])

    def args(self) -> list[str] | None:
        return self.called.read_text().splitlines() if self.called.exists() else None


def init_scripts(pod: Pod) -> list[Path]:
    """What the restore container left in /docker-entrypoint-initdb.d."""
    return sorted(pod.volumes[jobs.INITDB_VOLUME].iterdir())


def source_init_script(script: Path, env: Mapping[str, str], user: str | None) -> Ran:
    """Source one /docker-entrypoint-initdb.d script as the entrypoint does."""
    started = time.monotonic()
    done = subprocess.run(
        [*SOURCE_INIT_SCRIPT, str(script)],
        env=env,
        capture_output=True,
        text=True,
        user=user,
        timeout=CONTAINER_TIMEOUT_S,
        check=False,
    )
    return Ran(
        script.name, done.returncode, done.stdout, done.stderr, time.monotonic() - started, None
    )


def the_loader(pod: Pod) -> Path:
    """The one init script the restore container wrote: exactly the Job's RESTORE_LOADER."""
    scripts = init_scripts(pod)
    assert len(scripts) == 1, scripts
    loader = pod.env("restore")["RESTORE_LOADER"]
    assert scripts[0].read_text() == loader + "\n"
    return scripts[0]


def check_stored(
    object_store: ObjectStore, bucket: str, taken: Backup, version: str, folder: Path
) -> bytes:
    """The object and both companions are in the bucket, and say what was dumped; the object."""
    key = taken.location
    assert object_store.keys(bucket) == [key, f"{key}.json", f"{key}.sha256"]
    data = object_store.get(bucket, key)
    assert taken.result["size"] == len(data) > 0
    assert taken.sha256 == hashlib.sha256(data).hexdigest()
    # sha256sum's own format: `sha256sum -c` checks a download.
    name = key.rsplit("/", 1)[-1]
    (folder / name).write_bytes(data)
    (folder / f"{name}.sha256").write_bytes(object_store.get(bucket, f"{key}.sha256"))
    subprocess.run(["sha256sum", "--quiet", "-c", f"{name}.sha256"], cwd=folder, check=True)
    metadata = json.loads(object_store.get(bucket, f"{key}.json"))
    db = taken.db
    assert metadata["engine"] == db.spec.engine.value
    assert metadata["engineVersion"] == version, "the server's own version"
    assert (metadata["namespace"], metadata["database"], metadata["backup"]) == (
        db.namespace,
        db.name,
        BACKUP,
    )
    assert (metadata["size"], metadata["sha256"]) == (len(data), taken.sha256)
    return data


# --- the engines, as the round trip drives them -------------------------------------------------


def installed_version(server: str, pattern: str) -> str:
    """MAJOR.MINOR of a server installed here (what the Database's spec.version says)."""
    said = subprocess.run([server, "--version"], capture_output=True, text=True, check=True)
    found = re.search(pattern, said.stdout)
    assert found, said.stdout
    return f"{found[1]}.{found[2]}"


@dataclass(frozen=True)
class Restored:
    """The restore Job's work: the fetch, the load (the loader, or the whole restore
    container), and the data directory it left."""

    fetched: Ran
    loaded: Ran
    data: Path


class Driver(Protocol):
    """How a test runs one engine here: a first start as its image does it, the restore Job
    and what its entrypoint then does, and a server as the Database's pod would start it."""

    engine: Engine
    version: str  # the Database's spec.version (the engine installed here)
    dump_path: str  # PATH of the dump container: the engine's client tools

    def source(
        self, db: Database, credentials: Mapping[str, str], folder: Path
    ) -> AbstractContextManager[int]:
        """A first start of ``db`` (no data yet), serving on the port it yields."""
        ...

    def write(self, port: int, credentials: Mapping[str, str], amount: int) -> None: ...
    def digest(self, port: int, credentials: Mapping[str, str]) -> dict[str, str]: ...
    def about(self, port: int, credentials: Mapping[str, str]) -> tuple[str, str]:
        """The server's version, as the dump records it, and the data's size, for people."""
        ...

    def restore(self, pod: Pod, folder: Path) -> Restored: ...
    def serve(
        self, db: Database, credentials: Mapping[str, str], restored: Restored, folder: Path
    ) -> AbstractContextManager[int]:
        """The restored data, served as the Database's first pod would."""
        ...


# --- PostgreSQL ----------------------------------------------------------------------------------

PG_PATH = f"{postgres_bin()}:{os.environ['PATH']}"


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
        timeout=CONTAINER_TIMEOUT_S,
        check=False,
    )
    assert done.returncode in (0, 3), done.stderr + (log.read_text() if log.exists() else "")
    return done.returncode


def pg_running(env: Mapping[str, str], user: str | None) -> bool:
    return pg_ctl(env, user, "status") == 0


@contextlib.contextmanager
def postgres_first_start(env: Mapping[str, str], sockets: Path, user: str | None) -> Iterator[None]:
    """What the image's entrypoint does on a first start before its init scripts: initdb (as
    test_recipes does it), a temporary server on the socket only, and the database named after
    the user. Afterwards it stops the server, if nothing (the loader) did."""
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


def pg_query(port: int, credentials: Mapping[str, str], sql: str) -> str:
    """``sql`` as the Database's user, in its database (named after the user)."""
    user = credentials["username"]
    return psql(port, credentials["password"], user, sql, user)


PG_TABLES = ("customers", "orders", "attachments")


class Postgres:
    engine = Engine.POSTGRES
    version = postgres_bin().parent.name
    dump_path = PG_PATH

    @contextlib.contextmanager
    def source(self, db: Database, credentials: Mapping[str, str], folder: Path) -> Iterator[int]:
        user = run_as()
        sockets = owned(folder / "sockets", user)
        data = owned(folder / "volume", user) / "pgdata"
        env = container_env(db, dict(credentials)) | {
            "PGDATA": str(data),
            "PGPORT": "5432",
            "PATH": PG_PATH,
        }
        with postgres_first_start(env, sockets, user):
            pass
        with self._serving(db, data, sockets, credentials, folder / "server.log") as port:
            yield port

    @contextlib.contextmanager
    def _serving(
        self, db: Database, data: Path, sockets: Path, credentials: Mapping[str, str], log: Path
    ) -> Iterator[int]:
        """The server as the Database's pod runs it (its recipe), on 127.0.0.1, a free port."""
        port = free_port()
        local = ["-c", "listen_addresses=127.0.0.1", "-c", f"unix_socket_directories={sockets}"]
        recipe = replication.primary(Engine.POSTGRES, port=port, data_dir=str(data), settings=local)
        env = (
            container_env(db, dict(credentials))
            | recipe.env
            | {"PATH": PG_PATH, "PGDATA": str(data)}
        )
        argv = [str(postgres_bin() / "postgres"), "-D", str(data), *recipe.args[1:]]
        with running(argv, env, log, run_as()):
            username, password = credentials["username"], credentials["password"]
            wait_for(lambda: answers_db(port, password, username), what="PostgreSQL to answer")
            yield port

    def write(self, port: int, credentials: Mapping[str, str], amount: int) -> None:
        """What an application would have: customers, ``amount`` orders with an index and a
        foreign key, binary attachments (bytea), a large object, a view, a sequence in use."""
        pg_query(
            port,
            credentials,
            f"""
            CREATE TABLE customers (id int PRIMARY KEY, name text NOT NULL, email text UNIQUE,
                                    created timestamptz NOT NULL);
            INSERT INTO customers SELECT i, 'customer ' || i, 'c' || i || '@example.com',
                timestamptz '2024-01-01 00:00+00' + i * interval '1 minute'
              FROM generate_series(1, 10000) i;
            CREATE TABLE orders (id bigserial PRIMARY KEY,
                                 customer int NOT NULL REFERENCES customers,
                                 amount numeric(12, 2), note text, placed date);
            INSERT INTO orders (customer, amount, note, placed)
              SELECT 1 + i % 10000, (i % 99991) / 100.0,
                     md5(i::text) || md5((i * 31)::text) || md5((i * 97)::text) || ' ünïcødé',
                     date '2024-01-01' + i % 365
                FROM generate_series(1, {amount}) i;
            CREATE INDEX orders_by_customer ON orders (customer);
            CREATE TABLE attachments (id int PRIMARY KEY, body bytea NOT NULL);
            INSERT INTO attachments
              SELECT i, decode(repeat(md5(i::text) || md5((-i)::text), 32), 'hex')
              FROM generate_series(1, 2000) i;
            SELECT lo_from_bytea(0, decode(string_agg(md5(i::text), '' ORDER BY i), 'hex'))
              FROM generate_series(1, 65536) i;
            CREATE VIEW big_spenders AS SELECT customer, sum(amount) AS total FROM orders
              GROUP BY customer HAVING sum(amount) > {amount // 20};
            """,  # noqa: S608 - no values from outside
        )

    def digest(self, port: int, credentials: Mapping[str, str]) -> dict[str, str]:
        """Row count and md5 of each table's rows in order, of each large object, and the
        sequence and the view."""
        found = {}
        for table in PG_TABLES:
            copy = f"COPY (SELECT * FROM {table} ORDER BY id) TO STDOUT"  # noqa: S608
            rows = pg_query(port, credentials, copy)
            # psql() strips the last row's newline.
            found[table] = rows_digest(rows.encode() + b"\n" if rows else b"")
        found["large objects"] = pg_query(
            port,
            credentials,
            "SELECT count(*) || ' ' || string_agg(oid || ':' || md5(lo_get(oid)), ',' ORDER BY oid)"
            " FROM pg_largeobject_metadata",
        )
        found["sequence"] = pg_query(port, credentials, "SELECT last_value FROM orders_id_seq")
        found["view"] = pg_query(
            port, credentials, "SELECT count(*) || ' ' || sum(total) FROM big_spenders"
        )
        return found

    def about(self, port: int, credentials: Mapping[str, str]) -> tuple[str, str]:
        size = int(pg_query(port, credentials, "SELECT pg_database_size(current_database())"))
        return pg_query(port, credentials, "SHOW server_version"), f"{size / MB:.1f} MB on disk"

    def restore(self, pod: Pod, folder: Path) -> Restored:
        user = run_as()
        stand_in = StandIn.create(folder / "image", user)
        local = Local(path=stand_in.path(postgres_bin()), user=user)
        ran = succeeded(pod.run_all({"restore": local}), pod)
        assert stand_in.args() == ["postgres"], "the restore ends in the image's entrypoint"
        loader = the_loader(pod)
        # The entrypoint's env: the container's, what its first start exports, and PGHOST for
        # this machine's socket folder (a pod's is the default /var/run/postgresql).
        sockets = owned(folder / "sockets", user)
        env = pod.environment("restore", Local(path=PG_PATH))
        env |= {
            "PGHOST": str(sockets),
            "PGUSER": env["POSTGRES_USER"],
            "PGPASSWORD": env["POSTGRES_PASSWORD"],
        }
        with postgres_first_start(env, sockets, user):
            loaded = source_init_script(loader, env, user)
            assert loaded.returncode == 0, loaded.stderr
            assert "database-operator: restored" in loaded.stdout
            assert not pg_running(env, user), "the loader stops the temporary server"
        return Restored(ran["fetch"], loaded, Path(env["PGDATA"]))

    def serve(
        self, db: Database, credentials: Mapping[str, str], restored: Restored, folder: Path
    ) -> AbstractContextManager[int]:
        sockets = owned(folder / "sockets", run_as())
        return self._serving(db, restored.data, sockets, credentials, folder / "server.log")


def rows_digest(rows: bytes) -> str:
    """How many rows (lines, each ended by a newline: the clients escape those in values)
    and the md5 of them all."""
    count = rows.count(b"\n")
    return f"{count} rows, md5 {hashlib.md5(rows).hexdigest()}"  # noqa: S324


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
        timeout=CONTAINER_TIMEOUT_S,
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


MYSQL_TABLES = ("customers", "orders", "attachments")


class MySQL:
    engine = Engine.MYSQL
    version = installed_version("mariadbd", r"Ver (\d+)\.(\d+)")
    dump_path = os.environ["PATH"]

    @contextlib.contextmanager
    def source(self, db: Database, credentials: Mapping[str, str], folder: Path) -> Iterator[int]:
        user = engine_user(Engine.MYSQL)
        data = owned(folder / "volume", user) / "mysql"
        socket = folder / "volume" / "mysqld.sock"
        env = container_env(db, dict(credentials))
        with mysql_first_start(env, data, socket, folder / "first-start.log", user):
            pass
        with self._serving(data, socket, credentials, folder / "server.log") as port:
            yield port

    @contextlib.contextmanager
    def _serving(
        self, data: Path, socket: Path, credentials: Mapping[str, str], log: Path
    ) -> Iterator[int]:
        """The server as the image's entrypoint starts it, on 127.0.0.1 and a free port."""
        port = free_port()
        argv = mariadbd(data, socket, f"--port={port}", "--bind-address=127.0.0.1")
        with running(argv, dict(os.environ), log, engine_user(Engine.MYSQL)):
            username, password = credentials["username"], credentials["password"]
            wait_for(lambda: mysql_answers(username, password, port=port), what="MariaDB to answer")
            yield port

    def query(self, port: int, credentials: Mapping[str, str], sql: str) -> bytes:
        user = credentials["username"]
        return mysql(sql, user, credentials["password"], port=port, database=user)

    def write(self, port: int, credentials: Mapping[str, str], amount: int) -> None:
        """As the application (the Database's user): InnoDB tables with a foreign key, a
        trigger that fills a column, a stored function, a view, binary data."""
        self.query(
            port,
            credentials,
            f"""
            CREATE TABLE customers (id INT PRIMARY KEY, name VARCHAR(100) NOT NULL,
                                    email VARCHAR(200) UNIQUE, created DATETIME NOT NULL)
              ENGINE=InnoDB DEFAULT CHARSET=utf8mb4;
            INSERT INTO customers SELECT seq, CONCAT('customer ', seq),
                CONCAT('c', seq, '@example.com'), '2024-01-01' + INTERVAL seq MINUTE
              FROM seq_1_to_10000;
            CREATE TABLE orders (id BIGINT AUTO_INCREMENT PRIMARY KEY, customer INT NOT NULL,
                                 amount DECIMAL(12, 2), note TEXT, placed DATE,
                                 audited VARCHAR(20),
                                 KEY by_customer (customer),
                                 CONSTRAINT orders_customer FOREIGN KEY (customer)
                                   REFERENCES customers (id))
              ENGINE=InnoDB DEFAULT CHARSET=utf8mb4;
            CREATE TRIGGER orders_audit BEFORE INSERT ON orders FOR EACH ROW
              SET NEW.audited = CONCAT('trigger ', NEW.customer % 7);
            CREATE FUNCTION order_total(c INT) RETURNS DECIMAL(14, 2) READS SQL DATA
              RETURN (SELECT COALESCE(SUM(amount), 0) FROM orders WHERE customer = c);
            INSERT INTO orders (customer, amount, note, placed)
              SELECT 1 + seq % 10000, (seq % 99991) / 100,
                     CONCAT(MD5(seq), MD5(seq * 31), MD5(seq * 97), ' ünïcødé'),
                     '2024-01-01' + INTERVAL (seq % 365) DAY
                FROM seq_1_to_{amount};
            CREATE TABLE attachments (id INT PRIMARY KEY, body BLOB NOT NULL) ENGINE=InnoDB;
            INSERT INTO attachments SELECT seq, UNHEX(REPEAT(CONCAT(MD5(seq), MD5(-seq)), 32))
              FROM seq_1_to_2000;
            CREATE VIEW big_spenders AS SELECT customer, SUM(amount) AS total FROM orders
              GROUP BY customer HAVING SUM(amount) > {amount // 20};
            """,  # noqa: S608 - no values from outside
        )

    def digest(self, port: int, credentials: Mapping[str, str]) -> dict[str, str]:
        """Row count and md5 of each table's rows in order; the trigger, the function (its
        definition and a result), the view and the next AUTO_INCREMENT value."""
        found = {
            table: rows_digest(self.query(port, credentials, f"SELECT * FROM {table} ORDER BY id"))  # noqa: S608
            for table in MYSQL_TABLES
        }
        for name, sql in {
            "triggers": "SELECT TRIGGER_NAME, EVENT_MANIPULATION, ACTION_TIMING, ACTION_STATEMENT,"
            " DEFINER FROM information_schema.TRIGGERS WHERE TRIGGER_SCHEMA = DATABASE()",
            "routines": "SELECT ROUTINE_NAME, ROUTINE_TYPE, ROUTINE_DEFINITION, DEFINER"
            " FROM information_schema.ROUTINES WHERE ROUTINE_SCHEMA = DATABASE()",
            "function": "SELECT order_total(42)",
            "view": "SELECT COUNT(*), SUM(total) FROM big_spenders",
            "auto increment": "SELECT AUTO_INCREMENT FROM information_schema.TABLES"
            " WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = 'orders'",
        }.items():
            found[name] = self.query(port, credentials, sql).decode().strip()
        return found

    def about(self, port: int, credentials: Mapping[str, str]) -> tuple[str, str]:
        size = self.query(
            port,
            credentials,
            "SELECT SUM(DATA_LENGTH + INDEX_LENGTH) FROM information_schema.TABLES"
            " WHERE TABLE_SCHEMA = DATABASE()",
        )
        version = self.query(port, credentials, "SELECT VERSION()").decode().strip()
        return version, f"{int(size) / MB:.1f} MB of InnoDB tables and indexes"

    def restore(self, pod: Pod, folder: Path) -> Restored:
        user = engine_user(Engine.MYSQL)
        stand_in = StandIn.create(folder / "image", user)
        ran = succeeded(pod.run_all({"restore": Local(path=stand_in.path(), user=user)}), pod)
        assert stand_in.args() == ["mysqld"], "the restore ends in the image's entrypoint"
        loader = the_loader(pod)
        env = pod.environment("restore", Local())
        data = Path(env["RESTORE_DATA_DIR"])
        socket = data.parent / f"{data.name}.sock"
        # The entrypoint's env: the container's and SOCKET, where its temporary server listens.
        env["SOCKET"] = str(socket)
        with mysql_first_start(env, data, socket, folder / "first-start.log", user):
            loaded = source_init_script(loader, env, user)
            assert loaded.returncode == 0, loaded.stderr
            assert "database-operator: restored" in loaded.stdout
            pid = data.parent / "mysqld.pid"
            wait_for(lambda: not pid.exists(), what="the loader to stop the temporary server")
        return Restored(ran["fetch"], loaded, data)

    def serve(
        self, db: Database, credentials: Mapping[str, str], restored: Restored, folder: Path
    ) -> AbstractContextManager[int]:
        socket = restored.data.parent / f"{restored.data.name}.sock"
        return self._serving(restored.data, socket, credentials, folder / "server.log")


# --- Redis ---------------------------------------------------------------------------------------

#: Every key's name, type, whether it expires, and value (members sorted where the type has no
#: order), in key order: the count and a SHA-1 of it all (Redis's Lua has sha1hex).
REDIS_DIGEST = r"""
local keys = redis.call('KEYS', '*')
table.sort(keys)
local out = {}
for _, key in ipairs(keys) do
  local kind = redis.call('TYPE', key)['ok']
  local parts = {key, kind, redis.call('PTTL', key) > 0 and 'expires' or 'persists'}
  if kind == 'string' then
    parts[#parts + 1] = redis.call('GET', key)
  elseif kind == 'hash' then
    local flat, fields = redis.call('HGETALL', key), {}
    for i = 1, #flat, 2 do fields[#fields + 1] = flat[i] .. '=' .. flat[i + 1] end
    table.sort(fields)
    parts[#parts + 1] = table.concat(fields, ',')
  elseif kind == 'list' then
    parts[#parts + 1] = table.concat(redis.call('LRANGE', key, 0, -1), ',')
  elseif kind == 'set' then
    local members = redis.call('SMEMBERS', key)
    table.sort(members)
    parts[#parts + 1] = table.concat(members, ',')
  elseif kind == 'zset' then
    parts[#parts + 1] = table.concat(redis.call('ZRANGE', key, 0, -1, 'WITHSCORES'), ',')
  elseif kind == 'stream' then
    for _, entry in ipairs(redis.call('XRANGE', key, '-', '+')) do
      parts[#parts + 1] = entry[1] .. ':' .. table.concat(entry[2], ',')
    end
  else
    return redis.error_reply('no digest for type ' .. kind)
  end
  out[#out + 1] = table.concat(parts, '\0')
end
return {#keys, redis.sha1hex(table.concat(out, '\n'))}
"""


def resp(*args: str | bytes) -> bytes:
    """One command in Redis's protocol (what `redis-cli --pipe` sends as it is)."""
    parts = [arg.encode() if isinstance(arg, str) else arg for arg in args]
    return b"*%d\r\n" % len(parts) + b"".join(b"$%d\r\n%s\r\n" % (len(p), p) for p in parts)


class Redis:
    engine = Engine.REDIS
    version = installed_version("redis-server", r"v=(\d+)\.(\d+)")
    dump_path = os.environ["PATH"]

    @contextlib.contextmanager
    def source(self, db: Database, credentials: Mapping[str, str], folder: Path) -> Iterator[int]:
        with self._serving(
            db,
            credentials,
            owned(folder / "data", engine_user(Engine.REDIS)),
            folder / "server.log",
        ) as port:
            yield port

    @contextlib.contextmanager
    def _serving(
        self, db: Database, credentials: Mapping[str, str], data: Path, log: Path
    ) -> Iterator[int]:
        """The server as the Database's pod runs it (its recipe and spec.parameters), on
        127.0.0.1 and a free port."""
        port = free_port()
        local = [*settings(db), "--bind", "127.0.0.1"]
        recipe = replication.primary(Engine.REDIS, port=port, data_dir=str(data), settings=local)
        env = container_env(db, dict(credentials))
        argv, server_env = redis_server(recipe, env, data.parent)
        with running(argv, server_env, log, engine_user(Engine.REDIS)):
            password = credentials["password"]
            wait_for(lambda: ping(port, password), what="Redis to answer")
            # Loading a large dataset answers LOADING until it is done.
            wait_for(
                lambda: "loading:0" in redis_cli(port, password, "INFO", "persistence"),
                what="Redis to load",
            )
            yield port

    def write(self, port: int, credentials: Mapping[str, str], amount: int) -> None:
        """``amount`` keys of every type: strings (binary ones, some expiring in a day),
        hashes, lists, sets, sorted sets, and a stream."""
        commands = bytearray()
        for i in range(amount):
            kind = i % 10
            if kind < 6:
                expiry = ["PX", "86400000"] if i % 100 == 0 else []
                commands += resp("SET", f"string:{i}", b"value %d \x00\xff\r\n" % i, *expiry)
            elif kind == 6:
                commands += resp(
                    "HSET",
                    f"hash:{i}",
                    "name",
                    f"n{i}",
                    "count",
                    str(i),
                    "blob",
                    bytes([i % 256]) * 40,
                )
            elif kind == 7:
                commands += resp("RPUSH", f"list:{i}", *(f"item {i}.{j}" for j in range(5)))
            elif kind == 8:
                commands += resp("SADD", f"set:{i}", *(f"member {i * j % 97}" for j in range(1, 6)))
            else:
                commands += resp("ZADD", f"zset:{i}", "1.5", "a", "-2", f"b{i}", "3e10", "c")
        for i in range(100):
            commands += resp("XADD", "events", f"{i + 1}-1", "order", str(i), "state", "placed")
        done = subprocess.run(
            ["redis-cli", "-h", "127.0.0.1", "-p", str(port), "--no-auth-warning", "--pipe"],
            input=bytes(commands),
            env={**os.environ, "REDISCLI_AUTH": credentials["password"]},
            capture_output=True,
            check=True,
        )
        assert b"errors: 0" in done.stdout, done.stdout

    def digest(self, port: int, credentials: Mapping[str, str]) -> dict[str, str]:
        count, sha1 = redis_cli(port, credentials["password"], "EVAL", REDIS_DIGEST, "0").split()
        return {"keys": count, "sha1": sha1}

    def about(self, port: int, credentials: Mapping[str, str]) -> tuple[str, str]:
        info = redis_cli(port, credentials["password"], "INFO", "server", "memory")
        said = dict(line.split(":", 1) for line in info.splitlines() if ":" in line)
        return said["redis_version"], f"{said['used_memory_human']} in memory"

    def restore(self, pod: Pod, folder: Path) -> Restored:
        ran = succeeded(pod.run_all({"restore": Local(user=engine_user(Engine.REDIS))}), pod)
        assert "database-operator: restored" in ran["restore"].stdout
        return Restored(ran["fetch"], ran["restore"], Path(pod.env("restore")["RESTORE_DATA_DIR"]))

    def serve(
        self, db: Database, credentials: Mapping[str, str], restored: Restored, folder: Path
    ) -> AbstractContextManager[int]:
        return self._serving(db, credentials, restored.data, folder / "server.log")


# --- the round trip ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Source:
    """A Database with data, and a backup of it taken by its backup Job."""

    db: Database
    credentials: dict[str, str]
    digest: dict[str, str]
    version: str
    size: str
    taken: Backup


def backed_up(
    driver: Driver,
    folder: Path,
    destination: Mapping[str, Any],
    store: Mapping[str, str],
    amount: int,
    *,
    volumes: Mapping[str, Path] | None = None,
    **spec: Any,
) -> Source:
    """A Database with ``amount`` of data, backed up by its backup Job."""
    db = database(driver.engine, destination, version=driver.version, **spec)
    credentials = generated_credentials(db)
    with driver.source(db, credentials, folder / "source") as port:
        driver.write(port, credentials, amount)
        digest = driver.digest(port, credentials)
        version, size = driver.about(port, credentials)
        secrets = secrets_of(db, credentials, store)
        taken = take_backup(
            db, secrets, port, folder / "backup", path=driver.dump_path, volumes=volumes
        )
    return Source(db, credentials, digest, version, size, taken)


@dataclass(frozen=True)
class Target:
    """A new Database restored from a backup, and its data once served."""

    db: Database
    credentials: dict[str, str]
    restored: Restored
    digest: dict[str, str]


def restored_from(
    driver: Driver,
    source: Source,
    folder: Path,
    store: Mapping[str, str],
    *,
    credentials: Mapping[str, str] | None = None,
    volumes: Mapping[str, Path] | None = None,
    check: Callable[[int, Mapping[str, str]], None] | None = None,
    **spec: Any,
) -> Target:
    """A new Database restored from ``source``'s backup by its restore Job (its own generated
    credentials, unless ``credentials`` stand for a Secret of the user's), then started."""
    destination = destination_of(source.db).to_wire()
    db = database(driver.engine, destination, "shop-restored", version=driver.version, **spec)
    credentials = dict(credentials or generated_credentials(db))
    pod = restore_pod(
        db, source.taken, secrets_of(db, credentials, store), folder / "restore", volumes=volumes
    )
    restored = driver.restore(pod, folder / "restore")
    with driver.serve(db, credentials, restored, owned(folder / "target", None)) as port:
        digest = driver.digest(port, credentials)
        if check is not None:
            check(port, credentials)
    return Target(db, credentials, restored, digest)


def report(source: Source, target: Target, stored: bytes, data: str) -> None:
    taken, restored = source.taken, target.restored
    figures(
        f"{source.db.spec.engine.value} {source.version}",
        data=f"{data}, {source.size}",
        backup_object=f"{len(stored) / MB:.1f} MB",
        backup=f"{taken.seconds:.1f} s (dump {taken.dump_seconds:.1f} + upload "
        f"{taken.upload_seconds:.1f})",
        restore=f"{restored.fetched.seconds + restored.loaded.seconds:.1f} s (fetch "
        f"{restored.fetched.seconds:.1f} + load {restored.loaded.seconds:.1f})",
    )


def rows_written(digest: Mapping[str, str], tables: Sequence[str]) -> int:
    return sum(int(digest[table].split()[0]) for table in tables)


POSTGRES, MYSQL, REDIS = Postgres(), MySQL(), Redis()
DRIVERS = [pytest.param(driver, id=driver.engine.value) for driver in (POSTGRES, MYSQL, REDIS)]


@pytest.fixture
def folder(tmp_shared: Path) -> Path:
    """The test's folder, which the engines' users can use too (pytest's tmp_path is root's)."""
    return tmp_shared


# --- each engine, backed up and restored ---------------------------------------------------------


def test_a_postgres_backup_restores_every_row_into_a_new_database(
    object_store: ObjectStore,
    bucket: str,
    folder: Path,
) -> None:
    store = store_keys(object_store)
    source = backed_up(POSTGRES, folder, s3_destination(object_store, bucket), store, 400_000)
    stored = check_stored(object_store, bucket, source.taken, source.version, folder)
    assert stored.startswith(b"PGDMP"), "pg_dump's custom format"

    target = restored_from(POSTGRES, source, folder, store)

    assert target.credentials["password"] != source.credentials["password"]
    assert target.digest == source.digest
    rows = rows_written(source.digest, PG_TABLES)
    report(source, target, stored, f"{rows:,} rows in 3 tables and a 1 MB large object")


def test_an_encrypted_postgres_backup_holds_no_plaintext_and_restores_every_row(
    object_store: ObjectStore,
    bucket: str,
    folder: Path,
) -> None:
    """encryption.keySecretRef: the bucket holds AES-256-GCM ciphertext (none of the rows, not
    pg_dump's header), checksummed as stored; the restore Job decrypts it with the same Secret
    and every row comes back."""
    store = store_keys(object_store)
    destination = encrypted(s3_destination(object_store, bucket))
    source = backed_up(POSTGRES, folder, destination, store, 20_000)
    stored = check_stored(object_store, bucket, source.taken, source.version, folder)
    assert stored.startswith(b"DBOPAES1") and b"PGDMP" not in stored
    assert b"item " not in stored, "no row in clear"
    metadata = json.loads(object_store.get(bucket, f"{source.taken.location}.json"))
    key = base64.b64decode(ENCRYPTION_KEY)
    assert metadata["encryption"] == {"algorithm": "AES-256-GCM", "keyId": key_id(key)}
    assert metadata["plaintextSize"] == len(stored) - 36  # magic, IV and tag

    target = restored_from(POSTGRES, source, folder, store)

    assert target.digest == source.digest
    report(source, target, stored, f"{rows_written(source.digest, PG_TABLES):,} rows, encrypted")


def test_a_postgres_backup_restores_under_another_user_and_password(
    object_store: ObjectStore,
    bucket: str,
    folder: Path,
) -> None:
    store = store_keys(object_store)
    source = backed_up(POSTGRES, folder, s3_destination(object_store, bucket), store, 10_000)
    # A Secret of the user's: another user (and so database) name, another password.
    ledger = {
        "username": "ledger",
        "password": desired.generate_password(),
        "replication-password": desired.generate_password(),
    }

    def owned_by_ledger(port: int, credentials: Mapping[str, str]) -> None:
        tables = "SELECT DISTINCT tableowner FROM pg_tables WHERE schemaname = 'public'"
        assert pg_query(port, credentials, tables) == "ledger"
        assert pg_query(port, credentials, "SELECT current_database()") == "ledger"
        # The source's owner does not exist here: pg_restore --no-owner did not need it.
        assert (
            pg_query(port, credentials, "SELECT count(*) FROM pg_roles WHERE rolname = 'app'")
            == "0"
        )

    target = restored_from(
        POSTGRES,
        source,
        folder,
        store,
        credentials=ledger,
        check=owned_by_ledger,
        credentialsSecretRef={"name": "ledger-credentials"},
    )

    assert target.digest == source.digest


def test_a_mysql_backup_restores_every_row_trigger_and_function_into_a_new_database(
    object_store: ObjectStore,
    bucket: str,
    folder: Path,
) -> None:
    store = store_keys(object_store)
    source = backed_up(MYSQL, folder, s3_destination(object_store, bucket), store, 400_000)
    stored = check_stored(object_store, bucket, source.taken, source.version, folder)
    assert stored.startswith(b"\x1f\x8b"), "gzip"
    assert "orders_audit" in source.digest["triggers"]
    assert "order_total" in source.digest["routines"]

    def trigger_fires(port: int, credentials: Mapping[str, str]) -> None:
        insert = (
            "INSERT INTO orders (customer, amount) VALUES (3, 1.00);"
            " SELECT audited FROM orders WHERE id = LAST_INSERT_ID()"
        )
        assert MYSQL.query(port, credentials, insert).strip() == b"trigger 3"

    target = restored_from(MYSQL, source, folder, store, check=trigger_fires)

    assert target.credentials["password"] != source.credentials["password"]
    assert target.digest == source.digest
    rows = rows_written(source.digest, MYSQL_TABLES)
    report(source, target, stored, f"{rows:,} rows in 3 tables, a trigger, a function, a view")


@pytest.mark.parametrize("appendonly", [False, True], ids=["rdb", "appendonly"])
def test_a_redis_backup_restores_every_key(
    appendonly: bool,
    object_store: ObjectStore,
    bucket: str,
    folder: Path,
) -> None:
    store = store_keys(object_store)
    source = backed_up(REDIS, folder, s3_destination(object_store, bucket), store, 100_000)
    stored = check_stored(object_store, bucket, source.taken, source.version, folder)
    assert stored.startswith(b"REDIS"), "an RDB file"
    # Redis 7 with appendonly on loads only its AOF: the restore writes one from the RDB.
    parameters = {"appendonly": "yes"} if appendonly else {}

    target = restored_from(REDIS, source, folder, store, parameters=parameters)

    aof = target.restored.data / "appendonlydir" / "appendonly.aof.manifest"
    assert aof.exists() == appendonly
    assert target.digest == source.digest
    mode = "appendonly yes" if appendonly else "RDB only"
    report(source, target, stored, f"{int(source.digest['keys']):,} keys of 6 types ({mode})")


# --- a backup that must not be restored ---------------------------------------------------------


@pytest.mark.parametrize("driver", DRIVERS)
def test_a_restore_refuses_a_data_directory_that_holds_data(
    driver: Driver,
    folder: Path,
) -> None:
    # Never reached: the restore container alone is run.
    nowhere = {"s3": {"bucket": "unused", "credentialsSecretRef": {"name": S3_SECRET}}}
    db = database(driver.engine, nowhere, "shop-restored", version=driver.version)
    job = jobs.restore_job(db, destination_of(db), "recipes/prod/shop/x", None, JOB_OPTIONS)
    user = engine_user(driver.engine)
    pod = Pod(job, folder / "restore", secrets_of(db, generated_credentials(db), {}), owner=user)
    data = owned(Path(pod.env("restore")["RESTORE_DATA_DIR"]), user)
    (data / "lost+found").mkdir()  # a fresh volume's: not data
    (data / "PG_VERSION").write_text("the data of another life\n")
    stand_in = StandIn.create(folder / "image", user)

    ran = pod.run("restore", Local(path=stand_in.path(), user=user))

    assert ran.returncode == recipes.PERMANENT_EXIT, ran.stderr
    assert f"the data directory {data} is not empty: refusing to restore over data" in ran.stderr
    assert stand_in.args() is None, "the image's entrypoint is never reached"
    assert sorted(path.name for path in data.iterdir()) == ["PG_VERSION", "lost+found"]
    assert (data / "PG_VERSION").read_text() == "the data of another life\n"
    if jobs.INITDB_VOLUME in pod.volumes:
        assert init_scripts(pod) == [], "no loader for the entrypoint"


@pytest.fixture
def redis_backup(
    object_store: ObjectStore,
    bucket: str,
    folder: Path,
) -> Source:
    """A small Redis, backed up to the test's bucket by its backup Job."""
    destination = s3_destination(object_store, bucket)
    return backed_up(REDIS, folder, destination, store_keys(object_store), 2_000)


def refused(ran: Sequence[Ran], pod: Pod, *says: str) -> None:
    """The fetch failed for good, saying ``says``, and nothing was restored: the restore
    container never ran, the scratch volume holds no file (nor half of one), the data volume
    is empty."""
    assert [one.container for one in ran] == ["fetch"], "the restore container never runs"
    fetch = ran[0]
    assert fetch.returncode == recipes.PERMANENT_EXIT, fetch.stderr
    assert fetch.result is not None
    error = fetch.result["error"]
    for words in says:
        assert words in error
    assert f"fetch failed: {error}" in fetch.stderr
    assert list(pod.volumes[jobs.RESTORE_VOLUME].iterdir()) == []
    assert list(pod.volumes[jobs.DATA_VOLUME].iterdir()) == []


def new_redis_pod(source: Source, folder: Path, store: Mapping[str, str], **restore: Any) -> Pod:
    """The restore Job of a new Redis Database from ``source``'s backup, as a pod here."""
    destination = destination_of(source.db).to_wire()
    db = database(Engine.REDIS, destination, "shop-restored", version=REDIS.version)
    secrets = secrets_of(db, generated_credentials(db), store)
    return restore_pod(db, source.taken, secrets, folder / "restore", **restore)


def corrupted(data: bytes) -> bytes:
    """Sixteen bytes in the middle flipped: the same size, other content."""
    middle = len(data) // 2
    flipped = bytes(byte ^ 0xFF for byte in data[middle : middle + 16])
    return data[:middle] + flipped + data[middle + 16 :]


def truncated(data: bytes) -> bytes:
    return data[: len(data) // 2]


@pytest.mark.parametrize("damage", [corrupted, truncated])
def test_a_damaged_backup_is_refused_by_the_fetch_and_not_restored(
    damage: Callable[[bytes], bytes],
    redis_backup: Source,
    object_store: ObjectStore,
    bucket: str,
    folder: Path,
) -> None:
    key = redis_backup.taken.location
    whole = object_store.get(bucket, key)
    # The checksum and the metadata stay: only the object itself is damaged.
    object_store.put(bucket, key, damage(whole))
    pod = new_redis_pod(redis_backup, folder, store_keys(object_store))

    ran = pod.run_all({"restore": Local(user=engine_user(Engine.REDIS))})

    size = len(damage(whole))
    says = f"size {size} bytes, stored as {len(whole)}" if size != len(whole) else "sha256"
    refused(ran, pod, key, "is corrupt or truncated", says, "not restored")


def test_a_fetch_refuses_a_backup_whose_checksum_is_not_the_one_its_backup_recorded(
    redis_backup: Source,
    object_store: ObjectStore,
    folder: Path,
) -> None:
    recorded = "0" * 64  # what the DatabaseBackup says it stored
    pod = new_redis_pod(redis_backup, folder, store_keys(object_store), sha256=recorded)

    ran = pod.run_all({"restore": Local(user=engine_user(Engine.REDIS))})

    key = redis_backup.taken.location
    refused(ran, pod, key, "is corrupt or truncated", f"the DatabaseBackup says {recorded}")


def test_a_backup_of_another_engine_is_refused(
    redis_backup: Source,
    object_store: ObjectStore,
    folder: Path,
) -> None:
    # A PostgreSQL Database restored from the Redis backup's location.
    destination = destination_of(redis_backup.db).to_wire()
    db = database(Engine.POSTGRES, destination, "shop-restored", version=POSTGRES.version)
    secrets = secrets_of(db, generated_credentials(db), store_keys(object_store))
    pod = restore_pod(db, redis_backup.taken, secrets, folder / "restore")

    ran = pod.run_all({"restore": Local(user=run_as())})

    key = redis_backup.taken.location
    refused(ran, pod, key, "cannot be restored here", "a backup of 'redis', not of 'postgres'")


def test_a_backup_of_a_newer_major_version_is_refused(
    redis_backup: Source,
    object_store: ObjectStore,
    bucket: str,
    folder: Path,
) -> None:
    key = redis_backup.taken.location
    metadata = json.loads(object_store.get(bucket, f"{key}.json"))
    newer = int(REDIS.version.split(".")[0]) + 1
    object_store.put(
        bucket, f"{key}.json", json.dumps(metadata | {"engineVersion": f"{newer}.0.1"}).encode()
    )
    pod = new_redis_pod(redis_backup, folder, store_keys(object_store))

    ran = pod.run_all({"restore": Local(user=engine_user(Engine.REDIS))})

    refused(
        ran,
        pod,
        key,
        f"it was taken from redis {newer}.0.1",
        "cannot read what a newer major version wrote",
        f"restore into version {newer} or later",
    )


# --- deleting a backup, and backups on a claim ---------------------------------------------------


def test_the_delete_job_removes_the_backup_and_both_companions(
    redis_backup: Source,
    object_store: ObjectStore,
    bucket: str,
    folder: Path,
) -> None:
    key = redis_backup.taken.location
    other = key.replace(f"/{BACKUP}.", "/shop-older.")
    object_store.put(bucket, other, b"another backup, kept")
    completed = DatabaseBackup.model_validate(
        {
            **redis_backup.taken.backup.to_wire(),
            "status": {
                "phase": "Completed",
                "engine": "redis",
                "location": key,
                "destination": destination_of(redis_backup.db).to_wire(),
            },
        }
    )
    job = jobs.delete_job(completed, JOB_OPTIONS)
    pod = Pod(job, folder / "delete", {S3_SECRET: store_keys(object_store)})

    deleted = succeeded(pod.run_all(), pod)["delete"]

    assert deleted.result == {"deleted": key}
    assert object_store.keys(bucket) == [other]
    # A Job that runs again (its pod retried) finds them gone: that is done too.
    again = succeeded(pod.run_all(), pod)["delete"]
    assert again.result == {"deleted": key}
    assert object_store.keys(bucket) == [other]


def test_a_backup_on_a_claim_restores_every_key(folder: Path) -> None:
    claim = folder / "claim"  # the PersistentVolumeClaim both Jobs mount
    claim.mkdir()
    volumes = {jobs.DESTINATION_VOLUME: claim}
    destination = {"pvc": {"claimName": "backups"}}
    source = backed_up(REDIS, folder, destination, {}, 20_000, volumes=volumes)
    key = source.taken.location
    files = sorted(str(path.relative_to(claim)) for path in claim.rglob("*") if path.is_file())
    assert files == [key, f"{key}.json", f"{key}.sha256"]
    subprocess.run(
        ["sha256sum", "--quiet", "-c", f"{Path(key).name}.sha256"],
        cwd=(claim / key).parent,
        check=True,
    )

    target = restored_from(REDIS, source, folder, {}, volumes=volumes)

    assert target.digest == source.digest


# --- secrets stay off command lines --------------------------------------------------------------

#: Every command the dump scripts run (the dump container runs with only these on its PATH, so
#: one missing here fails the dump).
DUMP_COMMANDS = (
    "sh",
    "psql",
    "pg_dump",
    "mysql",
    "mysqldump",
    "redis-cli",
    "sed",
    "gzip",
    "mktemp",
    "mv",
    "rm",
)


def recording(
    folder: Path, commands: Sequence[str], path: str, user: str | None
) -> tuple[Path, Path]:
    """A folder of stand-ins that write their command line to a log, then exec the real
    command (found on ``path``); the folder and the log."""
    bin_ = owned(folder / "recording-bin", user)
    log = bin_ / "command-lines.log"
    log.touch()
    owned(bin_, user)
    if user:
        shutil.chown(log, user)
    for name in commands:
        real = shutil.which(name, path=path)
        assert real, f"{name} is not installed"
        shim = bin_ / name
        shim.write_text(f'#!/bin/sh\nprintf \'%s\\n\' ">>> {name} $*" >> {log}\nexec {real} "$@"\n')
        shim.chmod(0o755)
    return bin_, log


def command_lines(container: Manifest) -> str:
    return json.dumps([container["command"], container.get("args", [])])


@pytest.mark.parametrize("driver", DRIVERS)
def test_no_password_reaches_a_command_line(
    driver: Driver,
    object_store: ObjectStore,
    bucket: str,
    folder: Path,
) -> None:
    db = database(driver.engine, s3_destination(object_store, bucket), version=driver.version)
    credentials = generated_credentials(db)
    store = store_keys(object_store)
    secret_values = [v for k, v in credentials.items() if "password" in k] + [
        store[SECRET_ACCESS_KEY]
    ]
    backup = database_backup(db)
    location = location_of(db, backup)
    completed = DatabaseBackup.model_validate(
        {
            **backup.to_wire(),
            "status": {
                "engine": db.spec.engine.value,
                "location": location,
                "destination": destination_of(db).to_wire(),
            },
        }
    )
    built = [
        jobs.backup_job(backup, db, destination_of(db), location, JOB_OPTIONS),
        jobs.restore_job(db, destination_of(db), location, None, JOB_OPTIONS),
        jobs.delete_job(completed, JOB_OPTIONS),
    ]
    # The Jobs: no value in a command line; each secret only by reference.
    for job in built:
        for container in Pod(job, folder / "built", {}).containers.values():
            assert not [value for value in secret_values if value in command_lines(container)]
            for var in container.get("env", []):
                if var["name"] in {
                    *facts(driver.engine).secret_env,
                    ACCESS_KEY_ID,
                    SECRET_ACCESS_KEY,
                }:
                    assert set(var) == {"name", "valueFrom"}, var

    # The dump as it runs: every command it starts, with its command line.
    user = engine_user(driver.engine)
    bin_, log = recording(folder, DUMP_COMMANDS, driver.dump_path, user)
    with driver.source(db, credentials, folder / "source") as port:
        driver.write(port, credentials, 100)
        pod = Pod(built[0], folder / "backup", secrets_of(db, credentials, store), owner=user)
        service = {"DB_HOST": "127.0.0.1", "DB_PORT": str(port)}
        dumped = pod.run("dump", Local(service, path=str(bin_), user=user))

    assert dumped.returncode == 0, dumped.stderr
    ran = log.read_text()
    dumper = {Engine.POSTGRES: "pg_dump", Engine.MYSQL: "mysqldump", Engine.REDIS: "redis-cli"}
    assert f">>> {dumper[driver.engine]} " in ran
    assert not [value for value in secret_values if value in ran]
