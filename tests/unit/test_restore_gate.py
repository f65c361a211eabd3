"""Creating a Database from a backup: what `restore.gate` lets the reconcile do, branch by
branch, on an in-memory Kube (tests/fakekube.py)."""

from __future__ import annotations

import base64
import json
from datetime import UTC, datetime, timedelta
from typing import Any, cast

import pytest

from database_operator.api.backup import BackupDestination, DatabaseBackup
from database_operator.api.models import Database
from database_operator.backups import jobs, restore
from database_operator.backups.restore import Gate, Source
from database_operator.kube.api import KubeApi
from database_operator.manifest import Manifest
from database_operator.reasons import Problem, Reason
from tests.aio import synchronously
from tests.fakekube import FakeKube

NS = "prod"
AGENT = "registry.example.com/database-operator:1.2.3"
OPTIONS = jobs.JobOptions(agent_image=AGENT)
NOW = datetime(2026, 3, 10, 2, 0, tzinfo=UTC)
DIGEST = "cd" * 32
JOB = "shop-restore"
S3 = {"bucket": "backups", "credentialsSecretRef": {"name": "s3-creds"}}
OTHER_S3 = {"bucket": "archive", "credentialsSecretRef": {"name": "archive-creds"}}
LOCATION = "prod/old-shop/nightly.pgdump"


def make_db(restore_: Manifest | None = None, *, engine: str = "postgres", **spec: Any) -> Database:
    body: Manifest = {
        "metadata": {"name": "shop", "namespace": NS, "uid": "db-uid"},
        "spec": {"engine": engine, "storage": {"size": "1Gi"}, **spec},
    }
    if restore_ is not None:
        body["spec"]["restore"] = restore_
    return Database.model_validate(body)


FROM_BACKUP = {"backup": "nightly"}


def source_backup(
    phase: str | None = "Completed",
    *,
    engine: str = "postgres",
    version: str = "16.4",
    message: str | None = None,
) -> DatabaseBackup:
    return DatabaseBackup.model_validate(
        {
            "metadata": {"name": "nightly", "namespace": NS, "uid": "b-uid"},
            "spec": {"database": "old-shop"},
            "status": {
                "phase": phase,
                "engine": engine,
                "engineVersion": version,
                "destination": {"s3": S3},
                "location": LOCATION,
                "checksum": f"sha256:{DIGEST}",
                "message": message,
            },
        }
    )


def named(*backups: DatabaseBackup) -> dict[str, DatabaseBackup]:
    return {backup.name: backup for backup in backups}


def with_secrets(*names: str) -> FakeKube:
    """An API server holding S3 credentials Secrets of these names."""
    kube = FakeKube()
    for name in names:
        data = {
            key: base64.b64encode(b"x").decode()
            for key in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY")
        }
        kube.put({"kind": "Secret", "metadata": {"name": name, "namespace": NS}, "data": data})
    return kube


async def gate(
    kube: FakeKube,
    db: Database,
    backups: dict[str, DatabaseBackup] | None = None,
    primary: Manifest | None = None,
    now: datetime = NOW,
) -> Gate:
    return await restore.gate(
        cast(KubeApi, kube),
        db,
        named(source_backup()) if backups is None else backups,
        primary=primary,
        options=OPTIONS,
        now=now,
    )


# --- never again ----------------------------------------------------------------------------

RESTORED = {"location": LOCATION, "backup": "nightly"}


@pytest.mark.parametrize(
    ("db", "primary"),
    [
        pytest.param(make_db(), None, id="no-spec-restore"),
        pytest.param(
            Database.model_validate(
                {**make_db(FROM_BACKUP).to_wire(), "status": {"restoredFrom": RESTORED}}
            ),
            None,
            id="restored-before",
        ),
        pytest.param(
            make_db(FROM_BACKUP),
            {"kind": "Deployment", "metadata": {"name": "shop"}},
            id="the-primary-exists",
        ),
    ],
)
@synchronously
async def test_nothing_is_restored_when_there_is_nothing_to_restore_or_it_was_done(
    db: Database, primary: Manifest | None
) -> None:
    kube = with_secrets("s3-creds")
    assert await gate(kube, db, primary=primary) == Gate()
    assert (kube.reads, kube.writes) == ([], [])


# --- the source -----------------------------------------------------------------------------


@synchronously
async def test_a_source_backup_that_does_not_exist_fails_the_database_and_is_named() -> None:
    found = await gate(with_secrets("s3-creds"), make_db({"backup": "missing"}))
    assert found.hold is True
    assert found.failure is not None
    assert found.failure.reason == Reason.RESTORE_SOURCE_NOT_FOUND
    assert "DatabaseBackup 'missing' does not exist in namespace 'prod'" in found.failure.message


@synchronously
async def test_a_failed_source_backup_fails_the_database() -> None:
    backups = named(source_backup("Failed", message="disk full"))
    found = await gate(with_secrets("s3-creds"), make_db(FROM_BACKUP), backups)
    assert found.hold is True
    assert found.failure is not None
    assert found.failure.reason == Reason.RESTORE_SOURCE_NOT_COMPLETED
    assert "'nightly' failed" in found.failure.message
    assert "disk full" in found.failure.message


@pytest.mark.parametrize("phase", ["Pending", "Running", None])
@synchronously
async def test_a_source_backup_still_under_way_holds_the_database(phase: str | None) -> None:
    backups = named(source_backup(phase))
    kube = with_secrets("s3-creds")
    found = await gate(kube, make_db(FROM_BACKUP), backups)
    assert (found.hold, found.failure) == (True, None)
    assert found.progress is not None
    assert found.progress.reason == Reason.RESTORING
    assert found.progress.message == "waiting for DatabaseBackup 'nightly' to complete"
    assert kube.written() == []


@pytest.mark.parametrize(
    ("engine", "version", "words"),
    [
        pytest.param("mysql", "8.4.2", "it is a backup of 'mysql', not of 'postgres'", id="engine"),
        pytest.param("postgres", "17.1", "cannot read what a newer major", id="newer-major"),
    ],
)
@synchronously
async def test_a_source_backup_the_database_cannot_read_fails_it(
    engine: str, version: str, words: str
) -> None:
    backups = named(source_backup(engine=engine, version=version))
    kube = with_secrets("s3-creds")
    found = await gate(kube, make_db(FROM_BACKUP, version="16"), backups)
    assert found.failure is not None
    assert found.failure.reason == Reason.RESTORE_SOURCE_INCOMPATIBLE
    assert words in found.failure.message
    assert kube.written() == []


def test_an_older_major_is_restored_into_a_newer_one() -> None:
    source = restore.resolve(make_db(FROM_BACKUP, version="17"), named(source_backup()))
    assert source == Source(
        BackupDestination.model_validate({"s3": S3}), LOCATION, DIGEST, "nightly"
    )


@pytest.mark.parametrize(
    ("restore_", "backup", "destination"),
    [
        pytest.param(
            {"location": LOCATION, "destination": {"s3": OTHER_S3}},
            {"destination": {"s3": S3}},
            OTHER_S3,
            id="restore-destination",
        ),
        pytest.param(
            {"location": LOCATION}, {"destination": {"s3": S3}}, S3, id="backup-destination"
        ),
    ],
)
def test_a_location_is_read_from_the_restores_destination_else_the_databases(
    restore_: Manifest, backup: Manifest, destination: Manifest
) -> None:
    source = restore.resolve(make_db(restore_, backup=backup), {})
    assert source == Source(BackupDestination.model_validate({"s3": destination}), LOCATION)


@pytest.mark.parametrize(
    ("location", "path", "belongs_to"),
    [
        pytest.param("prod/old-shop/nightly.pgdump", None, None, id="own-prefix"),
        pytest.param("team-a/prod/shop/x.pgdump", "team-a", None, id="own-prefix-under-a-path"),
        pytest.param("staging/shop/x.pgdump", None, NS, id="another-namespaces-prefix"),
        pytest.param("team-a/staging/shop/x.pgdump", "team-a", NS, id="another-under-a-path"),
        pytest.param("prod/x.pgdump", "team-a", NS, id="outside-the-path"),
        pytest.param("production/shop/x.pgdump", None, NS, id="a-namespace-that-starts-alike"),
    ],
)
def test_a_location_outside_the_namespaces_prefix_is_restored_only_if_its_metadata_says_so(
    location: str, path: str | None, belongs_to: str | None
) -> None:
    """In a shared bucket every namespace's backups are at <path>/<namespace>/: one outside the
    Database's namespace's is fetched with --namespace, which the agent checks against the
    backup's own metadata (tests/integration/test_agent_store.py)."""
    s3 = S3 | ({"path": path} if path else {})
    db = make_db({"location": location}, backup={"destination": {"s3": s3}})
    source = restore.resolve(db, {})
    assert isinstance(source, Source)
    assert source.belongs_to == belongs_to
    [fetch] = jobs.restore_job(
        db, source.destination, location, None, OPTIONS, belongs_to=source.belongs_to
    )["spec"]["template"]["spec"]["initContainers"]
    wanted = [f"--namespace={NS}"] if belongs_to else []
    assert [arg for arg in fetch["command"] if arg.startswith("--namespace")] == wanted


@synchronously
async def test_a_destination_whose_encryption_keys_secret_is_missing_fails_the_database() -> None:
    """Its Job could never start (the key's volume): said at once, naming the Secret."""
    kube = with_secrets("s3-creds")
    sealed = {"s3": S3, "encryption": {"keySecretRef": {"name": "backup-key"}}}
    db = make_db({"location": LOCATION, "destination": sealed})
    found = await gate(kube, db, backups={})
    assert found.failure is not None
    assert found.failure.reason == Reason.DESTINATION_NOT_FOUND
    assert "Secret 'backup-key' does not exist" in found.failure.message
    assert kube.written() == []


@synchronously
async def test_a_destination_whose_secret_is_missing_fails_the_database() -> None:
    kube = with_secrets()
    found = await gate(kube, make_db(FROM_BACKUP))
    assert found.hold is True
    assert found.failure is not None
    assert found.failure.reason == Reason.DESTINATION_NOT_FOUND
    assert "Secret 's3-creds' does not exist" in found.failure.message
    assert kube.written() == []


# --- the restore Job ------------------------------------------------------------------------


@synchronously
async def test_the_first_look_creates_the_restore_job_and_holds_the_database() -> None:
    kube = with_secrets("s3-creds")
    db = make_db(FROM_BACKUP)
    found = await gate(kube, db)
    assert (found.hold, found.failure, found.restored) == (True, None, None)
    assert found.progress is not None
    assert found.progress.message == f"restoring DatabaseBackup nightly: Job {JOB}"
    job = kube.objects.get(("Job", NS, JOB))
    assert job is not None, "created in the Database's namespace"
    expected = jobs.restore_job(
        db, BackupDestination.model_validate({"s3": S3}), LOCATION, DIGEST, OPTIONS
    )
    assert job["spec"] == expected["spec"]
    assert kube.written("POST") == [("POST", "Job", JOB)]


@synchronously
async def test_a_running_restore_job_holds_the_database() -> None:
    kube = with_secrets("s3-creds")
    db = make_db(FROM_BACKUP)
    await gate(kube, db)
    kube.writes.clear()
    found = await gate(kube, db)
    assert (found.hold, found.failure) == (True, None)
    assert found.progress is not None and found.progress.reason == Reason.RESTORING
    assert kube.writes == []


def finish(kube: FakeKube, condition: str, **status: Any) -> None:
    kube.objects[("Job", NS, JOB)]["status"] = {
        "conditions": [
            {
                "type": condition,
                "status": "True",
                "reason": "BackoffLimitExceeded" if condition == "Failed" else "CompletionsReached",
                "message": "",
                "lastTransitionTime": "2026-03-10T02:10:00Z",
            }
        ],
        **status,
    }


@synchronously
async def test_a_failed_restore_job_fails_the_database_with_its_words() -> None:
    kube = with_secrets("s3-creds")
    db = make_db(FROM_BACKUP)
    await gate(kube, db)
    finish(kube, "Failed")
    error = {
        "error": f"{LOCATION} is corrupt or truncated (size 3 bytes, stored as 9): not restored"
    }
    kube.put(
        {
            "kind": "Pod",
            "metadata": {
                "name": "shop-restore-x1",
                "namespace": NS,
                "labels": {"batch.kubernetes.io/job-name": JOB},
            },
            "status": {
                "initContainerStatuses": [
                    {
                        "name": "fetch",
                        "state": {"terminated": {"exitCode": 3, "message": json.dumps(error)}},
                    }
                ]
            },
        }
    )
    found = await gate(kube, db)
    assert found.hold is True
    assert found.failure is not None
    assert found.failure.reason == Reason.RESTORE_FAILED
    assert found.failure.message == (
        f"restoring DatabaseBackup nightly failed (Job {JOB}, BackoffLimitExceeded): "
        f"fetch: {error['error']}"
    )


@synchronously
async def test_a_completed_restore_job_lets_the_database_start_and_records_it() -> None:
    kube = with_secrets("s3-creds")
    db = make_db(FROM_BACKUP)
    await gate(kube, db)
    finish(kube, "Complete", completionTime="2026-03-10T02:09:00Z")
    found = await gate(kube, db)
    assert (found.hold, found.failure, found.progress) == (False, None, None)
    assert found.restored is not None
    assert found.restored.to_wire() == {
        "backup": "nightly",
        "location": LOCATION,
        "time": "2026-03-10T02:09:00Z",
    }


@synchronously
async def test_a_location_is_restored_without_a_checksum_to_compare() -> None:
    kube = with_secrets("s3-creds")
    db = make_db({"location": LOCATION}, backup={"destination": {"s3": S3}})
    found = await gate(kube, db, backups={})
    assert found.progress is not None
    assert found.progress.message == f"restoring {LOCATION}: Job {JOB}"
    job = kube.objects[("Job", NS, JOB)]
    [fetch] = job["spec"]["template"]["spec"]["initContainers"]
    assert not [arg for arg in fetch["command"] if arg.startswith("--sha256")]


@synchronously
async def test_a_foreign_job_with_the_restore_jobs_name_fails_the_database() -> None:
    kube = with_secrets("s3-creds")
    kube.put({"kind": "Job", "metadata": {"name": JOB, "namespace": NS}, "spec": {}})
    found = await gate(kube, make_db(FROM_BACKUP))
    assert found.hold is True
    assert found.failure is not None
    assert found.failure.reason == Reason.CHILD_NAME_CONFLICT
    assert f"Job {JOB!r} exists and the operator did not create it" in found.failure.message
    assert kube.objects[("Job", NS, JOB)]["spec"] == {}


# --- a restore Job that cannot start ---------------------------------------------------------

PULL = 'failed to pull and unpack image "registry.example.com/database-operator:1.2.3": 401'


def waiting_pod(kube: FakeKube, reason: str, message: str) -> None:
    """The restore Job (made at NOW) has a pod whose fetch container waits to start."""
    kube.objects[("Job", NS, JOB)]["metadata"]["creationTimestamp"] = "2026-03-10T02:00:00Z"
    kube.put(
        {
            "kind": "Pod",
            "metadata": {
                "name": "shop-restore-x1",
                "namespace": NS,
                "labels": {"batch.kubernetes.io/job-name": JOB},
                "creationTimestamp": "2026-03-10T02:00:00Z",
            },
            "status": {
                "phase": "Pending",
                "startTime": "2026-03-10T02:00:01Z",
                "initContainerStatuses": [
                    {"name": "fetch", "state": {"waiting": {"reason": reason, "message": message}}}
                ],
            },
        }
    )


@synchronously
async def test_a_restore_job_that_cannot_start_says_why_then_fails_and_is_stopped() -> None:
    kube = with_secrets("s3-creds")
    db = make_db(FROM_BACKUP)
    await gate(kube, db)
    waiting_pod(kube, "ErrImagePull", PULL)
    found = await gate(kube, db, now=NOW + timedelta(minutes=4))
    assert (found.hold, found.failure) == (True, None)
    assert found.progress == Problem(
        Reason.RESTORING,
        f"restoring DatabaseBackup nightly: Job {JOB}; its pod waits: fetch: ErrImagePull: "
        f"{PULL} (stopped at 2026-03-10T02:05:01Z if it still waits then)",
    )
    kube.writes.clear()
    found = await gate(kube, db, now=NOW + timedelta(minutes=6))
    expected = Problem(
        Reason.START_DEADLINE_EXCEEDED,
        f"restoring DatabaseBackup nightly failed (Job {JOB}, StartDeadlineExceeded): its pod "
        f"did not start within 300 s: fetch: ErrImagePull: {PULL}",
    )
    assert (found.hold, found.failure, found.progress) == (True, expected, None)
    # Stopped, so that no pod of it tries again, and the restore is not tried over again.
    assert kube.writes == [("PATCH", "Job", JOB)]
    job = kube.objects[("Job", NS, JOB)]
    assert job["spec"]["suspend"] is True
    del kube.objects[("Pod", NS, "shop-restore-x1")]  # the Job controller deletes it
    kube.writes.clear()
    again = await gate(kube, db, now=NOW + timedelta(hours=1))
    assert (again.failure, kube.writes) == (expected, [])


@synchronously
async def test_a_secret_deleted_after_the_restore_job_was_made_is_reported_by_its_pod() -> None:
    kube = with_secrets("s3-creds")
    db = make_db(FROM_BACKUP)
    await gate(kube, db)
    del kube.objects[("Secret", NS, "s3-creds")]
    waiting_pod(kube, "CreateContainerConfigError", 'secret "s3-creds" not found')
    found = await gate(kube, db, now=NOW + timedelta(minutes=1))
    # Still restoring (the Secret may come back), and the kubelet's words name what is missing.
    assert found.failure is None and found.progress is not None
    assert (
        'fetch: CreateContainerConfigError: secret "s3-creds" not found' in found.progress.message
    )
    later = await gate(kube, db, now=NOW + timedelta(minutes=6))
    assert later.failure is not None
    assert later.failure.reason == Reason.START_DEADLINE_EXCEEDED
    assert 'secret "s3-creds" not found' in later.failure.message
