"""A backup's round trip on this machine, for the backup recipe tests
(tests/integration/test_backup_recipes.py): a Database with data (`backed_up`) is backed up by its
backup Job (`take_backup`) into a real store (tests/objectstore.py, or a folder standing for a
claim), a new Database is restored from it by its restore Job (`restored_from`) and served, and
the digests of both are kept for the test to compare; `check_stored` checks what the bucket
holds, `report` prints the figures (``pytest -s``). The Jobs are the operator's own builders'
(backups/jobs.py), run as pods here (tests/integration/jobpods.py); the engines are driven by
tests/integration/backupdrivers.py.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import subprocess
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from database_operator import desired
from database_operator.api.backup import (
    ACCESS_KEY_ID,
    SECRET_ACCESS_KEY,
    BackupDestination,
    DatabaseBackup,
)
from database_operator.api.models import Database
from database_operator.backups import jobs, recipes, state
from database_operator.engines import Engine
from tests.engines import engine_user, generated_credentials, make_db, owned
from tests.integration.backupdrivers import MB, Driver, Restored
from tests.integration.jobpods import Local, Pod, succeeded

if TYPE_CHECKING:
    from tests.objectstore import ObjectStore

AGENT_IMAGE = "registry.example.com/database-operator:test"
JOB_OPTIONS = jobs.JobOptions(agent_image=AGENT_IMAGE)
#: The Secret with the store's keys (the destination's credentialsSecretRef).
S3_SECRET = "backup-store"
BACKUP = "shop-now"


# --- Databases, backups and where they are stored ------------------------------------------------


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


def figures(engine: str, **values: str) -> None:
    """One line of measurements (pytest -s shows it)."""
    print(
        f"\n[figures] {engine}: "
        + "; ".join(f"{k.replace('_', ' ')} {v}" for k, v in values.items())
    )
