"""The branches of a DatabaseBackup's reconcile and of its finalizer, in milliseconds, on an
in-memory Kube (tests/fakekube.py): one test a branch."""

from __future__ import annotations

import asyncio
import base64
import copy
import json
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any, cast

from database_operator.api.backup import BackupDestination, DatabaseBackup
from database_operator.api.models import Database
from database_operator.backups import jobs
from database_operator.backups.controller import BackupController
from database_operator.backups.reconcile import BackupReconciler, BackupResult
from database_operator.config import Settings
from database_operator.events import EventSink
from database_operator.finalizers import FINALIZER
from database_operator.kube.api import Kube, KubeApi
from database_operator.kube.errors import ApiError
from database_operator.manifest import Manifest
from database_operator.metrics import Metrics
from tests.aio import synchronously
from tests.fakekube import FakeKube

NS = "prod"
AGENT = "registry.example.com/database-operator:1.2.3"
OPTIONS = jobs.JobOptions(agent_image=AGENT)
T0 = datetime(2026, 3, 10, 2, 0, tzinfo=UTC)
T1 = T0 + timedelta(minutes=5)
#: What the Secrets hold: never to be seen in a Job.
PASSWORD = "Kn0wn-Pa55word-of-the-Database"
SECRET_KEY = "Kn0wn-S3-Secret-Access-Key"
S3 = {"bucket": "backups", "path": "team", "credentialsSecretRef": {"name": "s3-creds"}}
DIGEST = "ab" * 32
JOB = "shop-1"


def encoded(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


@dataclass
class World:
    """The fake API server, the Events posted (kind, name, type, reason, message) and a clock."""

    kube: FakeKube = field(default_factory=FakeKube)
    events: list[tuple[str, str, str, str, str]] = field(default_factory=list)
    now: datetime = T0

    def events_for(self, obj: Manifest) -> EventSink:
        def post(type_: str, reason: str, message: str) -> None:
            self.events.append((obj["kind"], obj["metadata"]["name"], type_, reason, message))

        return post

    @property
    def backups(self) -> BackupReconciler:
        return BackupReconciler(
            cast(KubeApi, self.kube), self.events_for, lambda: self.now, OPTIONS
        )

    def reasons(self, kind: str) -> list[str]:
        return [reason for held, _, _, reason, _ in self.events if held == kind]

    def stored(self, kind: str, name: str) -> Manifest | None:
        return self.kube.objects.get((kind, NS, name))

    def jobs(self) -> list[str]:
        return sorted(name for kind, _, name in self.kube.objects if kind == "Job")

    def status(self, name: str = "shop-1") -> Manifest:
        found = self.stored("DatabaseBackup", name)
        assert found is not None
        status: Manifest = found.get("status") or {}
        return status

    async def reconcile(self, name: str = "shop-1", running: tuple[str, ...] = ()) -> BackupResult:
        """Reconcile the backup as stored now, with its Database as stored now."""
        body = self.stored("DatabaseBackup", name)
        assert body is not None
        database = self.stored("Database", body["spec"]["database"])
        return await self.backups.reconcile(body, database, running)

    async def finalize(self, name: str = "shop-1") -> bool:
        body = self.stored("DatabaseBackup", name)
        assert body is not None
        return (await self.backups.finalize(body)).done


def database(world: World, *, backup: bool = True, ready: bool = True, **spec: Any) -> Manifest:
    body: Manifest = {
        "apiVersion": "databases.example.com/v1",
        "kind": "Database",
        "metadata": {"name": "shop", "namespace": NS},
        "spec": {"engine": "postgres", "storage": {"size": "1Gi"}, **spec},
        "status": {"primaryReady": ready},
    }
    if backup:
        body["spec"]["backup"] = {"destination": {"s3": S3}}
    world.kube.put(
        {
            "kind": "Secret",
            "metadata": {"name": "shop-credentials", "namespace": NS},
            "data": {"username": encoded("app"), "password": encoded(PASSWORD)},
        }
    )
    return world.kube.put(body)


def s3_secret(world: World, **data: str) -> None:
    keys = data or {"AWS_ACCESS_KEY_ID": "AKIA-TEST", "AWS_SECRET_ACCESS_KEY": SECRET_KEY}
    world.kube.put(
        {
            "kind": "Secret",
            "metadata": {"name": "s3-creds", "namespace": NS},
            "data": {key: encoded(value) for key, value in keys.items()},
        }
    )


def new_backup(world: World, name: str = "shop-1", **spec: Any) -> Manifest:
    return world.kube.put(
        {
            "apiVersion": "databases.example.com/v1",
            "kind": "DatabaseBackup",
            "metadata": {"name": name, "namespace": NS},
            "spec": {"database": "shop", **spec},
        }
    )


def ready_world() -> World:
    world = World()
    database(world)
    s3_secret(world)
    new_backup(world)
    return world


async def running_world() -> World:
    """A backup whose Job was created and runs."""
    world = ready_world()
    await world.reconcile()
    assert world.status()["phase"] == "Running"
    world.events.clear()
    world.now = T1
    return world


def finish_job(world: World, condition: str, reason: str, name: str = JOB, **status: Any) -> None:
    """The Job ``name`` finished: its condition (Complete or Failed) and ``status`` fields."""
    job = world.stored("Job", name)
    assert job is not None
    job["status"] = {
        "conditions": [
            {
                "type": condition,
                "status": "True",
                "reason": reason,
                "message": f"the Job says {reason}",
                "lastTransitionTime": "2026-03-10T02:04:00Z",
            }
        ],
        **status,
    }


def job_pod(world: World, job: str, *terminated: tuple[str, int, str]) -> None:
    world.kube.put(
        {
            "kind": "Pod",
            "metadata": {
                "name": f"{job}-x1",
                "namespace": NS,
                "labels": {"batch.kubernetes.io/job-name": job},
            },
            "status": {
                "containerStatuses": [
                    {"name": name, "state": {"terminated": {"exitCode": code, "message": msg}}}
                    for name, code, msg in terminated
                ]
            },
        }
    )


def failed_with(world: World, reason: str) -> str:
    """The message of a backup that failed for ``reason``."""
    status = world.status()
    assert status["phase"] == "Failed"
    [failed] = [c for c in status["conditions"] if c["type"] == "Failed"]
    assert failed["status"] == "True"
    assert failed["reason"] == reason
    return str(status["message"])


# --- a new backup ---------------------------------------------------------------------------


@synchronously
async def test_a_backup_of_a_database_that_does_not_exist_fails() -> None:
    world = World()
    new_backup(world)
    result = await world.reconcile()
    message = failed_with(world, "DatabaseNotFound")
    assert message == "Database 'shop' does not exist in namespace 'prod'"
    assert (result.entered, result.reason) == ("Failed", "DatabaseNotFound")
    assert world.reasons("DatabaseBackup") == ["BackupFailed"]
    assert world.jobs() == []


@synchronously
async def test_a_database_being_deleted_is_not_backed_up() -> None:
    world = ready_world()
    world.kube.objects[("Database", NS, "shop")]["metadata"]["deletionTimestamp"] = "2026-03-10Z"
    await world.reconcile()
    failed_with(world, "DatabaseNotFound")
    assert world.jobs() == []


@synchronously
async def test_a_backup_with_no_destination_anywhere_fails() -> None:
    world = World()
    database(world, backup=False)
    new_backup(world)
    await world.reconcile()
    message = failed_with(world, "NoDestination")
    assert "spec.destination" in message and "spec.backup.destination" in message
    assert world.jobs() == []


@synchronously
async def test_a_backups_own_destination_is_used_when_the_database_has_none() -> None:
    world = World()
    database(world, backup=False)
    new_backup(world, destination={"pvc": {"claimName": "elsewhere"}})
    world.kube.put(
        {"kind": "PersistentVolumeClaim", "metadata": {"name": "elsewhere", "namespace": NS}}
    )
    await world.reconcile()
    assert world.status()["destination"] == {"pvc": {"claimName": "elsewhere"}}
    assert world.jobs() == [JOB]


@synchronously
async def test_a_missing_credentials_secret_fails_the_backup_and_names_it() -> None:
    world = World()
    database(world)
    new_backup(world)
    await world.reconcile()
    message = failed_with(world, "DestinationNotFound")
    assert message == "Secret 's3-creds' does not exist in namespace 'prod'"
    assert world.jobs() == []


@synchronously
async def test_a_credentials_secret_lacking_a_key_fails_the_backup_and_names_it() -> None:
    world = World()
    database(world)
    s3_secret(world, AWS_ACCESS_KEY_ID="AKIA-TEST")
    new_backup(world)
    await world.reconcile()
    message = failed_with(world, "DestinationNotFound")
    assert message == "Secret 's3-creds' lacks the key(s) AWS_SECRET_ACCESS_KEY"
    assert SECRET_KEY not in json.dumps(world.status())
    assert world.jobs() == []


@synchronously
async def test_a_database_scaled_to_zero_is_not_backed_up() -> None:
    world = World()
    database(world, replicas=0)
    s3_secret(world)
    new_backup(world)
    await world.reconcile()
    failed_with(world, "DatabaseScaledToZero")
    assert world.jobs() == []


@synchronously
async def test_a_backup_waits_for_the_primary_to_be_ready() -> None:
    world = World()
    database(world, ready=False)
    s3_secret(world)
    new_backup(world)
    result = await world.reconcile()
    status = world.status()
    assert (status["phase"], result.entered) == ("Pending", "Pending")
    assert {c["type"]: c["reason"] for c in status["conditions"]} == {
        "Completed": "WaitingForDatabase",
        "Failed": "AsExpected",
    }
    assert status["message"] == "waiting for Database 'shop''s primary to be ready"
    assert world.jobs() == []


@synchronously
async def test_a_backup_waits_for_another_backup_of_its_database() -> None:
    world = ready_world()
    await world.reconcile(running=("shop-0",))
    assert world.status()["phase"] == "Pending"
    assert world.status()["message"] == "waiting for backup shop-0 of Database 'shop' to finish"
    assert world.jobs() == []


@synchronously
async def test_a_waiting_backup_looked_at_again_writes_nothing() -> None:
    world = ready_world()
    await world.reconcile(running=("shop-0",))
    world.kube.writes.clear()
    world.now = T1
    result = await world.reconcile(running=("shop-0",))
    assert (result.body, result.entered, world.kube.writes) == (None, None, [])


@synchronously
async def test_a_ready_database_gets_the_backup_job_and_the_backup_runs() -> None:
    world = ready_world()
    result = await world.reconcile()
    body = world.stored("DatabaseBackup", "shop-1")
    db = world.stored("Database", "shop")
    assert body is not None and db is not None
    location = "team/prod/shop/shop-1.pgdump"
    expected = jobs.backup_job(
        DatabaseBackup.model_validate(body),
        Database.model_validate(db),
        BackupDestination.model_validate({"s3": S3}),
        location,
        OPTIONS,
    )
    job = world.stored("Job", JOB)
    assert job is not None
    # As the builder makes it; the API server adds a uid and a resourceVersion.
    added = {"uid", "resourceVersion"}
    metadata = {key: value for key, value in job["metadata"].items() if key not in added}
    assert {**job, "metadata": metadata} == expected
    status = world.status()
    assert status["phase"] == result.entered == "Running"
    assert (status["location"], status["engine"], status["job"]) == (location, "postgres", JOB)
    assert status["destination"] == {"s3": S3 | {"insecure": False}}
    assert status["databaseUID"] == db["metadata"]["uid"]
    assert status["startedAt"] == "2026-03-10T02:00:00Z"
    assert world.reasons("DatabaseBackup") == world.reasons("Database") == ["BackupStarted"]


@synchronously
async def test_no_secret_value_reaches_the_backup_job() -> None:
    world = ready_world()
    await world.reconcile()
    text = json.dumps(world.stored("Job", JOB))
    for secret in (PASSWORD, SECRET_KEY):
        assert secret not in text
        assert encoded(secret) not in text


@synchronously
async def test_a_completed_job_completes_the_backup_with_what_the_agent_stored() -> None:
    world = await running_world()
    finish_job(world, "Complete", "CompletionsReached", completionTime="2026-03-10T02:04:30Z")
    result = {"size": 4096, "sha256": DIGEST, "engineVersion": "16.4", "location": "k"}
    job_pod(world, JOB, ("upload", 0, json.dumps(result)))
    outcome = await world.reconcile()
    status = world.status()
    assert status["phase"] == outcome.entered == "Completed"
    assert (status["size"], status["checksum"], status["engineVersion"]) == (
        4096,
        f"sha256:{DIGEST}",
        "16.4",
    )
    assert status["completedAt"] == "2026-03-10T02:04:30Z"
    assert {c["type"]: c["status"] for c in status["conditions"]} == {
        "Completed": "True",
        "Failed": "False",
    }
    assert world.reasons("DatabaseBackup") == world.reasons("Database") == ["BackupCompleted"]


@synchronously
async def test_a_running_job_keeps_the_backup_running_and_writes_nothing() -> None:
    world = await running_world()
    world.kube.writes.clear()
    result = await world.reconcile()
    assert (result.entered, world.kube.writes, world.events) == (None, [], [])


@synchronously
async def test_a_failed_job_fails_the_backup_with_the_containers_words() -> None:
    world = await running_world()
    finish_job(world, "Failed", "PodFailurePolicy")
    error = {"error": "uploading k to s3://backups: AccessDenied"}
    job_pod(world, JOB, ("upload", 3, json.dumps(error)))
    result = await world.reconcile()
    message = failed_with(world, "BackupJobFailed")
    assert message == (
        f"Job {JOB} failed (PodFailurePolicy): upload: uploading k to s3://backups: AccessDenied"
    )
    assert result.reason == "BackupJobFailed"
    assert world.reasons("Database") == ["BackupFailed"]


@synchronously
async def test_a_job_deleted_before_it_finished_fails_the_backup() -> None:
    world = await running_world()
    del world.kube.objects[("Job", NS, JOB)]
    await world.reconcile()
    message = failed_with(world, "BackupJobLost")
    assert message == f"its Job {JOB} was deleted before it finished"


@synchronously
async def test_a_job_that_completed_without_a_result_fails_the_backup() -> None:
    world = await running_world()
    finish_job(world, "Complete", "CompletionsReached")
    await world.reconcile()
    failed_with(world, "BackupJobLost")


@synchronously
async def test_a_finished_backup_reads_and_writes_nothing() -> None:
    world = World()
    new_backup(world)
    await world.reconcile()
    assert world.status()["phase"] == "Failed"
    world.kube.reads.clear()
    world.kube.writes.clear()
    world.events.clear()
    result = await world.reconcile()
    assert (world.kube.reads, world.kube.writes, world.events) == ([], [], [])
    assert (result.body, result.entered) == (None, None)


@synchronously
async def test_a_foreign_job_with_the_backup_jobs_name_fails_the_backup() -> None:
    world = ready_world()
    world.kube.put({"kind": "Job", "metadata": {"name": JOB, "namespace": NS}, "spec": {}})
    await world.reconcile()
    message = failed_with(world, "ChildNameConflict")
    assert f"Job {JOB!r} exists and the operator did not create it" in message
    assert world.kube.objects[("Job", NS, JOB)]["spec"] == {}, "the namesake is left alone"


@synchronously
async def test_the_backups_own_job_found_again_is_followed_not_a_conflict() -> None:
    world = ready_world()
    await world.reconcile()
    # The status write was lost: the backup is new again, its Job exists.
    world.kube.objects[("DatabaseBackup", NS, "shop-1")].pop("status")
    await world.reconcile()
    assert world.status()["phase"] == "Running"


# --- the end of a backup's life -------------------------------------------------------------


async def completed_world() -> World:
    world = await running_world()
    finish_job(world, "Complete", "CompletionsReached", completionTime="2026-03-10T02:04:30Z")
    job_pod(world, JOB, ("upload", 0, json.dumps({"size": 1, "sha256": DIGEST})))
    await world.reconcile()
    assert world.status()["phase"] == "Completed"
    world.events.clear()
    return world


DELETE_JOB = "shop-1-delete"


@synchronously
async def test_a_backup_that_stored_nothing_goes_at_once() -> None:
    world = World()
    new_backup(world)
    await world.reconcile()
    assert await world.finalize() is True
    assert world.jobs() == []


@synchronously
async def test_a_stored_backup_waits_for_its_delete_job_and_goes_once_it_completed() -> None:
    world = await completed_world()
    assert await world.finalize() is False
    job = world.stored("Job", DELETE_JOB)
    assert job is not None
    assert (
        job["spec"]
        == jobs.delete_job(
            DatabaseBackup.model_validate(world.stored("DatabaseBackup", "shop-1")), OPTIONS
        )["spec"]
    )
    assert await world.finalize() is False, "its Job runs"
    finish_job(world, "Complete", "CompletionsReached", name=DELETE_JOB)
    assert await world.finalize() is True
    assert world.reasons("DatabaseBackup") == ["BackupDataDeleted"]


@synchronously
async def test_a_finalized_backup_woken_again_before_its_deleted_event_is_left_alone() -> None:
    # The controller learns from its own finalizer removal that the backup is done with: a wake
    # from a Job between that and the DELETED event finalizes nothing twice (fresh-clone run).
    world = await completed_world()
    controller = BackupController(
        cast(Kube, world.kube),
        cast(KubeApi, world.kube),
        Settings(),
        Metrics(),
        world.events_for,
        {},
        lambda database, trigger: None,
        asyncio.Event(),
        now=lambda: world.now,
    )
    backup = world.stored("DatabaseBackup", "shop-1")
    assert backup is not None
    backup["metadata"]["finalizers"] = [FINALIZER]
    backup["metadata"]["deletionTimestamp"] = "2026-03-10T02:10:00Z"
    controller.observe("MODIFIED", copy.deepcopy(backup))
    key = (NS, "shop-1")
    await controller.process(key, "update")
    finish_job(world, "Complete", "CompletionsReached", name=DELETE_JOB)
    await controller.process(key, "Job")
    assert world.stored("DatabaseBackup", "shop-1") is None
    assert world.reasons("DatabaseBackup") == ["BackupDataDeleted"]
    controller.wake(key, "Job")  # e.g. the backup's own Job, taken by the garbage collector
    await controller.process(key, "Job")
    assert world.reasons("DatabaseBackup") == ["BackupDataDeleted"]


@synchronously
async def test_a_failed_delete_job_keeps_the_backup_and_says_how_to_go_on() -> None:
    world = await completed_world()
    await world.finalize()
    finish_job(world, "Failed", "BackoffLimitExceeded", name=DELETE_JOB)
    job_pod(world, DELETE_JOB, ("delete", 3, json.dumps({"error": "AccessDenied"})))
    assert await world.finalize() is False
    message = world.status()["message"]
    assert "delete: AccessDenied" in message
    assert "Delete the Job to try again" in message
    assert "remove the finalizer to keep the data" in message
    assert world.reasons("DatabaseBackup") == ["BackupDataNotDeleted"]
    world.kube.writes.clear()
    assert await world.finalize() is False
    assert (world.kube.writes, world.reasons("DatabaseBackup")) == ([], ["BackupDataNotDeleted"])


@synchronously
async def test_a_backup_whose_credentials_are_gone_goes_and_its_data_is_kept() -> None:
    world = await completed_world()
    del world.kube.objects[("Secret", NS, "s3-creds")]
    assert await world.finalize() is True
    assert world.jobs() == [JOB]
    [(_, _, type_, reason, message)] = world.events
    assert (type_, reason) == ("Warning", "BackupDataKept")
    assert "s3://backups/team: team/prod/shop/shop-1.pgdump" in message
    assert "Secret 's3-creds' does not exist" in message


@synchronously
async def test_a_backup_in_a_namespace_being_deleted_goes_and_its_data_is_kept() -> None:
    world = await completed_world()
    world.kube.failures.append(
        (
            "POST",
            "Job",
            ApiError(
                403,
                "Forbidden",
                "unable to create new content in namespace prod because it is being terminated",
                "POST",
                "jobs",
            ),
        )
    )
    assert await world.finalize() is True
    assert world.reasons("DatabaseBackup") == ["BackupDataKept"]
    assert DELETE_JOB not in world.jobs()


@synchronously
async def test_a_running_backup_deleted_stops_its_job_before_deleting_the_data() -> None:
    world = await running_world()
    assert await world.finalize() is False
    assert world.jobs() == [DELETE_JOB]
    assert ("DELETE", "Job", JOB) in world.kube.writes


# --- Jobs that cannot start -----------------------------------------------------------------

IMAGE_GONE = 'Back-off pulling image "registry.example.com/database-operator:1.2.3"'


def waiting_pod(world: World, job: str, container: str, reason: str, message: str) -> None:
    """``job`` (made at T0) has a pod whose ``container`` waits to start since 02:02: for a
    backup, its dump ended then."""
    found = world.stored("Job", job)
    assert found is not None
    found["metadata"]["creationTimestamp"] = "2026-03-10T02:00:00Z"
    ended = {
        "name": "dump",
        "state": {"terminated": {"exitCode": 0, "finishedAt": "2026-03-10T02:02:00Z"}},
    }
    waits = {"name": container, "state": {"waiting": {"reason": reason, "message": message}}}
    world.kube.put(
        {
            "kind": "Pod",
            "metadata": {
                "name": f"{job}-x1",
                "namespace": NS,
                "labels": {"batch.kubernetes.io/job-name": job},
                "creationTimestamp": "2026-03-10T02:00:00Z",
            },
            "status": {
                "phase": "Pending",
                "startTime": "2026-03-10T02:02:00Z",
                "initContainerStatuses": [ended] if container == "upload" else [],
                "containerStatuses": [waits],
            },
        }
    )


@synchronously
async def test_a_backup_whose_pod_cannot_start_says_why_then_fails_and_its_job_is_stopped() -> None:
    world = await running_world()  # now 02:05
    waiting_pod(world, JOB, "upload", "ImagePullBackOff", IMAGE_GONE)
    result = await world.reconcile()
    status = world.status()
    assert (result.entered, status["phase"]) == (None, "Running")
    assert status["message"] == (
        f"Job {JOB} is backing up Database shop to s3://backups/team: "
        f"team/prod/shop/shop-1.pgdump; its pod waits: upload: ImagePullBackOff: {IMAGE_GONE} "
        "(stopped at 2026-03-10T02:07:00Z if it still waits then)"
    )
    world.kube.writes.clear()
    await world.reconcile()
    assert world.kube.writes == [], "the same wait: nothing to write"

    world.now = T0 + timedelta(minutes=7)
    result = await world.reconcile()
    assert failed_with(world, "StartDeadlineExceeded") == (
        f"Job {JOB} failed (StartDeadlineExceeded): its pod did not start within 300 s: "
        f"upload: ImagePullBackOff: {IMAGE_GONE}"
    )
    assert result.reason == "StartDeadlineExceeded"
    assert world.reasons("Database") == ["BackupFailed"]
    job = world.stored("Job", JOB)
    assert job is not None
    assert job["spec"]["suspend"] is True
    assert "did not start" in job["metadata"]["annotations"]["databases.example.com/stopped"]


@synchronously
async def test_a_delete_job_that_cannot_start_lets_the_backup_go_and_keeps_the_data() -> None:
    world = await completed_world()  # now 02:05
    assert await world.finalize() is False
    waiting_pod(world, DELETE_JOB, "delete", "ErrImagePull", "401 Unauthorized")
    world.now = T0 + timedelta(minutes=6)
    assert await world.finalize() is False
    message = world.status()["message"]
    assert message.startswith(
        "deleting the stored backup at s3://backups/team: team/prod/shop/shop-1.pgdump: "
        f"Job {DELETE_JOB}; its pod waits: delete: ErrImagePull: 401 Unauthorized"
    )
    assert message.endswith("then the data is kept and the DatabaseBackup goes")

    world.now = T0 + timedelta(minutes=7)
    assert await world.finalize() is True
    [(_, _, type_, reason, said)] = world.events
    assert (type_, reason) == ("Warning", "BackupDataKept")
    assert said == (
        "kept the stored backup at s3://backups/team: team/prod/shop/shop-1.pgdump: "
        f"Job {DELETE_JOB} failed (StartDeadlineExceeded): its pod did not start within 300 s: "
        "delete: ErrImagePull: 401 Unauthorized"
    )
    job = world.stored("Job", DELETE_JOB)
    assert job is not None and job["spec"]["suspend"] is True
    # Looked at again (a restart before the finalizer went): the stopped Job says the same.
    world.events.clear()
    assert await world.finalize() is True
    assert world.reasons("DatabaseBackup") == ["BackupDataKept"]
