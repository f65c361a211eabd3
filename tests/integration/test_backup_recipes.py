"""The backup and restore recipes, run for real: Debian's own PostgreSQL, MariaDB (standing in
for MySQL) and Redis on loopback, and a real S3 store (SeaweedFS, tests/objectstore.py).

A backup counts only when it was restored and the data compared. So each test writes rows,
takes the backup through the backup Job's own containers, restores it through the restore Job's
containers into a fresh instance, and compares counts and checksums with the source.

The Jobs are built by the operator's pure builders (backups/jobs.py) and run by `Pod`
(tests/integration/jobpods.py): each container's command, args and env come from the built
manifest, secretKeyRefs are resolved from the values the test holds (the Database's generated
credentials, the store's keys), and the agent runs as `python -m database_operator.cli agent`, as
`database-operator agent` runs in the operator's image. What differs is only what a shared test
machine must: the pod's volumes are folders (the manifest's mount paths are mapped to them), the
Service is 127.0.0.1 on a free port, the agent writes its termination message to a file of the
test's. PostgreSQL's and MySQL's restore containers end by exec'ing their image's
``docker-entrypoint.sh``, which this machine lacks: a stand-in records how it was called, and the
test does what that entrypoint does on a first start (initialise, a temporary socket-only server,
users and database, then source the scripts in ``/docker-entrypoint-initdb.d``: the restore's
loader), before the server starts as the Database's first pod would start it. The engines are
driven as tests/integration/backupdrivers.py says, the round trip is
tests/integration/roundtrip.py's.

Run with ``-s`` to see the figures: each engine's data size, its backup's size, and how long
the backup (dump + upload) and the restore (fetch + load) took.
"""

from __future__ import annotations

import base64
import json
import shutil
import subprocess
import uuid
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from database_operator import desired
from database_operator.api.backup import ACCESS_KEY_ID, SECRET_ACCESS_KEY, DatabaseBackup
from database_operator.backups import jobs, recipes
from database_operator.backups.encryption import key_id
from database_operator.engines import Engine, facts
from database_operator.manifest import Manifest
from tests.engines import engine_user, generated_credentials, owned, run_as
from tests.integration.backupdrivers import (
    MYSQL,
    MYSQL_TABLES,
    PG_TABLES,
    POSTGRES,
    REDIS,
    Driver,
    pg_query,
)
from tests.integration.jobpods import Local, Pod, Ran, StandIn, init_scripts, succeeded
from tests.integration.roundtrip import (
    BACKUP,
    ENCRYPTION_KEY,
    JOB_OPTIONS,
    S3_SECRET,
    Source,
    backed_up,
    check_stored,
    database,
    database_backup,
    destination_of,
    encrypted,
    location_of,
    report,
    restore_pod,
    restored_from,
    rows_written,
    s3_destination,
    secrets_of,
    store_keys,
)

if TYPE_CHECKING:
    from tests.objectstore import ObjectStore

DRIVERS = [pytest.param(driver, id=driver.engine.value) for driver in (POSTGRES, MYSQL, REDIS)]


@pytest.fixture
def bucket(object_store: ObjectStore) -> str:
    """A fresh bucket for one test."""
    name = f"b-{uuid.uuid4().hex[:12]}"
    object_store.create_bucket(name)
    return name


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
