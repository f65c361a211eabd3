"""When a backup is judged, and what its changes wake, through the two controllers (the
Databases' and the DatabaseBackups', linked as the operator links them) on an in-memory Kube
(tests/fakekube.py): the Databases are known before any backup is looked at, a backup
whose Job exists goes on from it, where its Job stores is recorded before the Job exists, and
a backup's own status write wakes its Database. The same against the real API server, across
real restarts: tests/integration/test_backup_restarts.py."""

from __future__ import annotations

import base64
import json
from typing import Any

from database_operator.backups import jobs
from database_operator.backups.controller import BackupController
from database_operator.controller import Controller
from database_operator.manifest import Key, Manifest
from database_operator.runner.build import backups_beside
from tests.aio import synchronously
from tests.fakekube import FakeKube
from tests.unit.controllers import NS, make, process_all, stored

DB: Key = (NS, "db")
BACKUP: Key = (NS, "db-now")
S3 = {"bucket": "backups", "credentialsSecretRef": {"name": "s3"}}
DIGEST = "ab" * 32


def encoded(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


def ready_database(kube: FakeKube) -> Manifest:
    """A Database with a backup destination whose primary serves (as its status last said),
    and the Secrets a backup's Job needs."""
    kube.put(
        {
            "kind": "Secret",
            "metadata": {"name": "s3", "namespace": NS},
            "data": {
                "AWS_ACCESS_KEY_ID": encoded("AKIA"),
                "AWS_SECRET_ACCESS_KEY": encoded("not-a-secret"),
            },
        }
    )
    return kube.put(
        {
            "apiVersion": "databases.example.com/v1",
            "kind": "Database",
            "metadata": {"name": "db", "namespace": NS},
            "spec": {"engine": "postgres", "backup": {"destination": {"s3": S3}}},
            "status": {"phase": "Active", "primaryReady": True},
        }
    )


def new_backup(kube: FakeKube, **status: Any) -> Manifest:
    body: Manifest = {
        "apiVersion": "databases.example.com/v1",
        "kind": "DatabaseBackup",
        "metadata": {"name": BACKUP[1], "namespace": NS},
        "spec": {"database": "db"},
    }
    if status:
        body["status"] = status
    return kube.put(body)


def controller_of(kube: FakeKube) -> tuple[Controller, BackupController]:
    """The Databases' controller and the DatabaseBackups' beside it, linked as the operator
    links them."""
    controller = make(kube, namespaces=[NS])
    return controller, backups_beside(controller)


async def primed(kube: FakeKube) -> tuple[Controller, BackupController]:
    """A restart: both controllers new, their caches listed as at the operator's start (the
    Databases first)."""
    controller, backups = controller_of(kube)
    await controller.prime()
    await backups.prime()
    return controller, backups


async def process_backups(backups: BackupController) -> list[str]:
    """Work every ready backup once; the phase each ended in."""
    phases = []
    queue = backups.queue
    while len(queue):
        item = await queue.get()
        assert item is not None
        await backups.process(*item)
        queue.done(item[0])
        held = backups.index.model(item[0])
        phases.append(str(held.status.phase) if held is not None else "gone")
    return phases


def phase(kube: FakeKube) -> str | None:
    body = stored(kube, "DatabaseBackup", BACKUP[1]) or {}
    return (body.get("status") or {}).get("phase")


async def started(kube: FakeKube) -> tuple[Controller, BackupController]:
    """Controllers that heard of the Database and its new backup, and started the backup."""
    controller, backups = controller_of(kube)
    controller.observe("ADDED", stored(kube, "Database") or {})
    backups.observe("ADDED", stored(kube, "DatabaseBackup", BACKUP[1]) or {})
    assert await process_backups(backups) == ["Running"]
    return controller, backups


def job_done(kube: FakeKube, controller: Controller, name: str) -> None:
    """The backup's Job completed, its agent's result on its pod; the Job's watch event."""
    job = stored(kube, "Job", name)
    assert job is not None
    job["status"] = {
        "completionTime": "2026-03-10T02:04:30Z",
        "conditions": [{"type": "Complete", "status": "True"}],
    }
    kube.put(
        {
            "kind": "Pod",
            "metadata": {
                "name": f"{name}-x1",
                "namespace": NS,
                "labels": {"batch.kubernetes.io/job-name": name},
            },
            "status": {
                "containerStatuses": [
                    {
                        "name": "upload",
                        "state": {
                            "terminated": {
                                "exitCode": 0,
                                "message": json.dumps({"size": 10, "sha256": DIGEST}),
                            }
                        },
                    }
                ]
            },
        }
    )
    controller.child_event("MODIFIED", kube.put(job))


@synchronously
async def test_a_backup_listed_at_start_is_judged_against_the_databases_listed_before_it() -> None:
    kube = FakeKube()
    ready_database(kube)
    new_backup(kube)
    controller, backups = await primed(kube)  # a restart: nothing heard yet
    assert DB in controller.databases
    assert await process_backups(backups) == ["Running"]
    assert stored(kube, "Job", BACKUP[1]) is not None


@synchronously
async def test_a_backup_whose_database_the_cache_lacks_reads_it_before_failing() -> None:
    kube = FakeKube()
    ready_database(kube)
    controller, backups = controller_of(kube)
    # The backup's watch event came first (two watches, in no order); the Database's not yet.
    backups.observe("ADDED", new_backup(kube))
    assert await process_backups(backups) == ["Running"]
    assert DB in controller.databases  # kept: the Databases' loop looks at it
    assert await process_all(controller) == 1


@synchronously
async def test_a_backup_of_a_database_that_does_not_exist_still_fails() -> None:
    kube = FakeKube()
    _, backups = controller_of(kube)
    backups.observe("ADDED", new_backup(kube))
    assert await process_backups(backups) == ["Failed"]
    status = (stored(kube, "DatabaseBackup", BACKUP[1]) or {})["status"]
    assert status["conditions"][0]["reason"] == "DatabaseNotFound"
    assert "location" not in status


@synchronously
async def test_where_a_job_stores_is_recorded_before_the_job_is_created() -> None:
    kube = FakeKube()
    ready_database(kube)
    new_backup(kube)
    _, backups = await primed(kube)
    writes = len(kube.writes)
    await process_backups(backups)
    done = [(verb, what) for verb, what, _ in kube.writes[writes:]]
    assert done == [
        ("PATCH", "DatabaseBackup"),  # the finalizer
        ("PATCH", "DatabaseBackup/status"),  # location, destination, engine, Job: recorded
        ("POST", "Job"),
        ("PATCH", "DatabaseBackup/status"),  # Running
    ]


@synchronously
async def test_a_backup_whose_job_exists_goes_on_from_it_even_with_its_database_gone() -> None:
    kube = FakeKube()
    ready_database(kube)
    new_backup(kube)
    await started(kube)
    # Killed after the Job was created, before the Running write; the Database deleted while
    # the operator was down.
    job = stored(kube, "Job", BACKUP[1])
    assert job is not None
    backup = stored(kube, "DatabaseBackup", BACKUP[1]) or {}
    recorded = {key: backup["status"][key] for key in ("location", "destination", "engine")}
    backup.pop("status")
    kube.put(backup)
    del kube.objects[("Database", NS, "db")]

    _, second = await primed(kube)
    assert await process_backups(second) == ["Running"]
    status = (stored(kube, "DatabaseBackup", BACKUP[1]) or {})["status"]
    # Where it stores, as its Job says (nothing was recorded; the Database is gone).
    assert status["location"] == recorded["location"] == f"{NS}/db/db-now.pgdump"
    assert (status["engine"], status["job"]) == ("postgres", BACKUP[1])
    assert [name for kind, _, name in kube.objects if kind == "Job"] == [BACKUP[1]]


@synchronously
async def test_an_adopted_job_that_finished_meanwhile_completes_its_backup_at_once() -> None:
    kube = FakeKube()
    ready_database(kube)
    new_backup(kube)
    first, _ = await started(kube)
    backup = stored(kube, "DatabaseBackup", BACKUP[1]) or {}
    backup["status"]["phase"] = "Pending"  # killed before the Running write
    kube.put(backup)
    job_done(kube, first, BACKUP[1])  # ... and the Job ran while the operator was away

    _, second = await primed(kube)
    assert await process_backups(second) == ["Completed"]


@synchronously
async def test_a_pending_backup_deleted_stops_its_job_before_deleting_the_data() -> None:
    kube = FakeKube()
    ready_database(kube)
    new_backup(kube)
    _, backups = await started(kube)
    backup = stored(kube, "DatabaseBackup", BACKUP[1]) or {}
    backup["status"]["phase"] = "Pending"  # its Job made just before a restart
    backup["metadata"]["deletionTimestamp"] = "2026-03-10T02:10:00Z"
    backups.observe("MODIFIED", kube.put(backup))
    await process_backups(backups)
    names = [name for kind, _, name in kube.objects if kind == "Job"]
    assert names == [jobs.job_name(BACKUP[1], "-delete")], "its Job stopped, the deletion's made"


@synchronously
async def test_a_backups_own_status_writes_wake_its_database() -> None:
    kube = FakeKube()
    ready_database(kube)
    new_backup(kube)
    controller, backups = await started(kube)
    await process_all(controller)  # the Database
    # The echo of the Running write changes nothing.
    backups.observe("MODIFIED", stored(kube, "DatabaseBackup", BACKUP[1]) or {})
    assert len(controller.queue) == 0

    job_done(kube, controller, BACKUP[1])
    assert await process_backups(backups) == ["Completed"]
    assert len(controller.queue) == 1
    assert await controller.queue.get() == (DB, "DatabaseBackup")
    controller.queue.done(DB)
    # ... and its echo, when it comes, queues nothing more.
    backups.observe("MODIFIED", stored(kube, "DatabaseBackup", BACKUP[1]) or {})
    assert len(controller.queue) == 0


@synchronously
async def test_a_bug_in_a_backups_turn_is_retried_and_never_ends_its_worker() -> None:
    """Before, only API failures were retried: anything else escaped process() and ended the
    worker that met it (two workers: two such bugs and no backup was looked at again)."""
    kube = FakeKube()
    ready_database(kube)
    new_backup(kube)
    _, backups = controller_of(kube)
    backups.observe("ADDED", stored(kube, "DatabaseBackup", BACKUP[1]) or {})
    work = backups._work
    calls = []

    async def buggy(key: Key, body: Manifest) -> Any:
        calls.append(key)
        if len(calls) == 1:
            raise RuntimeError("a bug")
        return await work(key, body)

    backups._work = buggy  # type: ignore[method-assign]
    item = await backups.queue.get()
    assert item is not None
    await backups.process(*item)  # no exception: logged, and the key scheduled again
    backups.queue.done(item[0])
    assert backups.queue.failures(BACKUP) == 1  # its retry is scheduled
    await backups.process(BACKUP, "retry")  # the retry, when its delay is over
    assert calls == [BACKUP, BACKUP]
    assert phase(kube) == "Running"
    assert backups.queue.failures(BACKUP) == 0
