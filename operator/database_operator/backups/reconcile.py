"""One DatabaseBackup's reconcile, and the end of its life.

- New or Pending: check what the backup needs — its Database, a destination whose Secret and
  claim exist (a Job missing them would wait forever instead of failing), a primary that serves,
  no other backup of the Database running — then record where its Job will store it (location,
  destination, engine: before the Job exists, so that whatever happens next the backup says
  where its data is, and its deletion deletes it), create its Job and say Running; or say why it
  waits, or why it failed. A backup whose Job exists already (created just before the operator
  was killed, the Running write lost) goes on from that Job: nothing the Database or the other
  backups say now can stop a Job that runs, so none of them fails it.
- Running: follow the Job; once it finished, read what the agent stored (its termination
  message) or why it failed (the containers' last words), and say Completed or Failed. While
  its pod cannot start a container, the message says why (the scheduler's or the kubelet's
  words); once that has lasted the start deadline, the Job is stopped and the backup Failed
  (StartDeadlineExceeded): a backup whose pod never starts must not hold up the schedule.
- Completed and Failed are final: nothing is read or written for them again.
- Deleted: its stored data goes first (a Job of the agent deletes it), then the finalizer. When
  that cannot be done — the namespace is being deleted, the destination's Secret is gone, or
  the delete Job's pod did not start by the start deadline (its image cannot be pulled) — the
  data is kept, and an Event on the DatabaseBackup (and a log line) says where.

Events on the Database say when a backup starts, completes or fails.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import Any

from database_operator.api.backup import (
    BACKUP_KIND,
    BackupDestination,
    BackupPhase,
    DatabaseBackup,
    DatabaseBackupStatus,
)
from database_operator.api.models import Database
from database_operator.backups import agent, jobs, recipes, state
from database_operator.backups.jobs import JobOptions
from database_operator.backups.observe import destination_problem, follow_job
from database_operator.clock import Clock
from database_operator.compare import merge_patch_of
from database_operator.events import EventSink
from database_operator.kube.api import KubeApi
from database_operator.kube.errors import ApiError
from database_operator.logs import get_logger
from database_operator.manifest import Manifest
from database_operator.reasons import Reason

#: Gives the EventSink of an object (a DatabaseBackup, or its Database).
EventsFor = Callable[[Manifest], EventSink]


@dataclass
class BackupResult:
    """What one reconcile of a DatabaseBackup found and did."""

    status: DatabaseBackupStatus
    #: The DatabaseBackup as the status write returned it (None: not written).
    body: Manifest | None = None
    #: The phase it entered this time (None: it stayed where it was).
    entered: BackupPhase | None = None
    #: Why it failed (the reason), when it just did.
    reason: str | None = None
    #: When its Job, whose pod waits to start, is stopped: it is looked at again then.
    deadline: datetime | None = None


@dataclass(frozen=True)
class Finalized:
    """What one look at a deleted DatabaseBackup did."""

    #: Its finalizer may go.
    done: bool
    #: When its delete Job, whose pod waits to start, is stopped: it is looked at again then.
    deadline: datetime | None = None


def _ref(obj: DatabaseBackup | Database) -> Manifest:
    """What an Event needs to name ``obj``."""
    return {"apiVersion": obj.api_version, "kind": obj.kind, "metadata": obj.metadata}


def _running(job: str, database: str, where: str) -> str:
    """A running backup's message (its pod's troubles are added to it)."""
    return f"Job {job} is backing up Database {database} to {where}"


def _where(status: DatabaseBackupStatus) -> str:
    """Where a backup is stored, for people: its destination and location."""
    if status.destination is None:
        return str(status.location)
    return f"{status.destination.describe()}: {status.location}"


def _stored_by(job: Manifest) -> tuple[str | None, str | None]:
    """Where a backup Job's agent stores (its BACKUP_KEY) and the engine it was told, read
    from the Job: for a Job made before its backup recorded them (an earlier version)."""
    pod = (job.get("spec") or {}).get("template", {}).get("spec") or {}
    for container in pod.get("containers") or []:
        command = [str(arg) for arg in container.get("command") or []]
        if command[: len(jobs.AGENT_COMMAND)] != jobs.AGENT_COMMAND:
            continue
        env = {e.get("name"): e.get("value") for e in container.get("env") or []}
        engines = [arg.removeprefix("--engine=") for arg in command if arg.startswith("--engine=")]
        return env.get(agent.KEY), next(iter(engines), None)
    return None, None


def _with_status(backup: DatabaseBackup, status: DatabaseBackupStatus) -> DatabaseBackup:
    return backup.model_copy(update={"status": status})


def _owned_by(obj: Manifest, backup: DatabaseBackup) -> bool:
    refs = obj.get("metadata", {}).get("ownerReferences") or []
    uid = backup.metadata.get("uid")
    return any(ref.get("controller") and ref.get("uid") == uid for ref in refs)


@dataclass
class BackupReconciler:
    """Reconciles DatabaseBackups: the API, where Events go, the clock, what the settings say
    of Jobs."""

    kube: KubeApi
    events_for: EventsFor
    now: Clock
    options: JobOptions

    async def reconcile(
        self,
        body: Mapping[str, Any],
        database: Mapping[str, Any] | None,
        running: Sequence[str] = (),
    ) -> BackupResult:
        """Move one DatabaseBackup along. ``database``: its Database as cached (None: none by
        that name); ``running``: the other backups of that Database running now."""
        backup = DatabaseBackup.model_validate(dict(body))
        if state.finished(backup):
            return BackupResult(backup.status)
        db = Database.model_validate(dict(database)) if database else None
        if db is not None and db.metadata.get("deletionTimestamp"):
            db = None
        if backup.status.phase is BackupPhase.RUNNING:
            return await self._follow(backup, db)
        return await self._start(backup, db, running)

    async def _write(self, backup: DatabaseBackup, new: DatabaseBackupStatus) -> BackupResult:
        patch = merge_patch_of(backup.status.to_wire(), new.to_wire())
        if not patch:
            return BackupResult(new)
        written = await self.kube.patch_status(backup.namespace, backup.name, patch, BACKUP_KIND)
        return BackupResult(new, written, new.phase if new.phase != backup.status.phase else None)

    def _tell(
        self, backup: DatabaseBackup, db: Database | None, type_: str, reason: str, text: str
    ) -> None:
        """An Event on the DatabaseBackup, and on its Database if it exists."""
        self.events_for(_ref(backup))(type_, reason, text)
        if db is not None:
            self.events_for(_ref(db))(type_, reason, text)

    async def _fail(
        self, backup: DatabaseBackup, db: Database | None, reason: Reason, message: str
    ) -> BackupResult:
        at = self.now()
        uid = {"database_uid": db.metadata.get("uid")} if db is not None else {}
        status = state.advance(
            backup, BackupPhase.FAILED, reason, message, at, completed_at=at, **uid
        )
        result = await self._write(backup, status)
        result.reason = reason
        self._tell(backup, db, "Warning", "BackupFailed", f"backup {backup.name} failed: {message}")
        return result

    def _obstacle(
        self, backup: DatabaseBackup, db: Database | None
    ) -> tuple[Reason, str] | BackupDestination:
        """Why ``backup`` cannot be taken (a reason and a message), else where it goes."""
        name = backup.spec.database
        if db is None:
            return (
                Reason.DATABASE_NOT_FOUND,
                f"Database {name!r} does not exist in namespace {backup.namespace!r}",
            )
        if db.spec.replicas == 0:
            return (
                Reason.DATABASE_SCALED_TO_ZERO,
                f"Database {name!r} has spec.replicas 0: no server runs to back up",
            )
        destination = backup.spec.destination or (
            db.spec.backup.destination if db.spec.backup else None
        )
        if destination is None:
            return (
                Reason.NO_DESTINATION,
                f"neither spec.destination nor Database {name!r}'s spec.backup.destination "
                "says where to store it",
            )
        return destination

    async def _own_job(self, backup: DatabaseBackup, live: bool = False) -> Manifest | None:
        """The backup's Job, if it exists and is the one made for it (the cache's word, or
        with ``live`` the API server's)."""
        read = self.kube.get_live if live else self.kube.get
        job = await read("Job", backup.namespace, jobs.backup_job_name(backup))
        return job if job is not None and _owned_by(job, backup) else None

    async def _fail_unstarted(
        self, backup: DatabaseBackup, db: Database | None, reason: Reason, message: str
    ) -> BackupResult:
        """Fail a backup that has not started, for good — unless its Job exists after all (the
        cache had not heard of it yet): then it goes on from that Job."""
        if (job := await self._own_job(backup, live=True)) is not None:
            return await self._adopt(backup, db, job)
        return await self._fail(backup, db, reason, message)

    async def _adopt(
        self, backup: DatabaseBackup, db: Database | None, job: Manifest
    ) -> BackupResult:
        """Go on from the backup's Job, made before a restart cut the Running write short:
        where it stores as recorded then, else as the Job says (a Job of an earlier version).
        Then follow it at once: it may have finished meanwhile, and no event of it will come."""
        if backup.status.location is None:
            location, engine = _stored_by(job)
            destination = backup.spec.destination or (
                db.spec.backup.destination if db is not None and db.spec.backup else None
            )
            found: dict[str, Any] = {
                "location": location,
                "destination": destination,
                "engine": db.spec.engine.value if db is not None else engine,
                "database_uid": db.metadata.get("uid") if db is not None else None,
            }
            backup = _with_status(backup, backup.status.model_copy(update=found))
        started = await self._run(backup, db, str(job["metadata"]["name"]))
        followed = await self._follow(_with_status(backup, started.status), db)
        return BackupResult(
            followed.status,
            followed.body or started.body,
            followed.entered or started.entered,
            followed.reason,
        )

    async def _run(self, backup: DatabaseBackup, db: Database | None, job: str) -> BackupResult:
        """Say Running: ``job`` takes the backup to where its status records."""
        where = _where(backup.status)
        at = self.now()
        status = state.advance(
            backup,
            BackupPhase.RUNNING,
            Reason.BACKUP_RUNNING,
            _running(job, backup.spec.database, where),
            at,
            started_at=at,
            job=job,
        )
        result = await self._write(backup, status)
        text = f"backup {backup.name} started: Job {job}, to {where}"
        self._tell(backup, db, "Normal", "BackupStarted", text)
        # Followed until its pod starts: a Job that makes no pod changes no more.
        return replace(result, deadline=self._start_deadline())

    def _start_deadline(self) -> datetime:
        """When a Job made now must have started its pod."""
        return self.now() + timedelta(seconds=self.options.start_deadline_s)

    async def _start(
        self, backup: DatabaseBackup, db: Database | None, running: Sequence[str]
    ) -> BackupResult:
        if (job := await self._own_job(backup)) is not None:
            return await self._adopt(backup, db, job)
        found = self._obstacle(backup, db)
        if isinstance(found, tuple):
            return await self._fail_unstarted(backup, db, *found)
        assert db is not None
        destination = found
        if problem := await destination_problem(self.kube, backup.namespace, destination):
            return await self._fail_unstarted(backup, db, Reason.DESTINATION_NOT_FOUND, problem)
        name = backup.spec.database
        wait = None
        if not db.status.primary_ready:
            wait = f"waiting for Database {name!r}'s primary to be ready"
        elif running:
            wait = f"waiting for backup {running[0]} of Database {name!r} to finish"
        if wait is not None:
            status = state.advance(
                backup, BackupPhase.PENDING, Reason.WAITING_FOR_DATABASE, wait, self.now()
            )
            return await self._write(backup, status)

        location = state.location(
            state.destination_prefix(destination), backup, recipes.EXTENSIONS[db.spec.engine]
        )
        manifest = jobs.backup_job(backup, db, destination, location, self.options)
        job_name = manifest["metadata"]["name"]
        # Where the Job will store, recorded before it exists: a kill, a restart or a failure
        # from here on leaves a backup that says where its data is (and deletes it when it goes).
        planned = {
            "location": location,
            "destination": destination,
            "engine": db.spec.engine.value,
            "database_uid": db.metadata.get("uid"),
            "job": job_name,
        }
        recorded = await self._write(backup, backup.status.model_copy(update=planned))
        backup = _with_status(backup, recorded.status)
        if await self.kube.create(manifest, exist_ok=True) is None:
            existing = await self.kube.get_live("Job", backup.namespace, job_name)
            if existing is not None and not _owned_by(existing, backup):
                why = (
                    f"Job {job_name!r} exists and the operator did not create it for this "
                    "backup: it does not take over objects it did not create; delete that Job, "
                    "or create the backup under another name"
                )
                return await self._fail(backup, db, Reason.CHILD_NAME_CONFLICT, why)
        return await self._run(backup, db, job_name)

    async def _follow(self, backup: DatabaseBackup, db: Database | None) -> BackupResult:
        job_name = backup.status.job or jobs.backup_job_name(backup)
        job = await self.kube.get("Job", backup.namespace, job_name)
        if job is None:
            why = f"its Job {job_name} was deleted before it finished"
            return await self._fail(backup, db, Reason.BACKUP_JOB_LOST, why)
        outcome = await follow_job(
            self.kube, backup.namespace, job, self.now(), self.options.start_deadline_s
        )
        where = _where(backup.status)
        if not outcome.finished:
            message = _running(job_name, backup.spec.database, where) + state.waiting_note(outcome)
            written = await self._write(
                backup,
                state.advance(
                    backup, BackupPhase.RUNNING, Reason.BACKUP_RUNNING, message, self.now()
                ),
            )
            return replace(written, deadline=outcome.deadline)
        if outcome.failed:
            message = f"Job {job_name} failed ({outcome.reason}): {outcome.message}"
            reason = (
                Reason.START_DEADLINE_EXCEEDED
                if outcome.reason == state.NOT_STARTED
                else Reason.BACKUP_JOB_FAILED
            )
            return await self._fail(backup, db, reason, message)
        result = outcome.result or {}
        if not isinstance(result.get("size"), int) or not result.get("sha256"):
            why = f"its Job {job_name} succeeded but did not report what it stored"
            return await self._fail(backup, db, Reason.BACKUP_JOB_LOST, why)
        message = f"stored {result['size']} bytes at {where}"
        at = self.now()
        status = state.advance(
            backup,
            BackupPhase.COMPLETED,
            Reason.BACKUP_COMPLETED,
            message,
            at,
            completed_at=outcome.finished_at or at,
            size=result["size"],
            checksum=f"sha256:{result['sha256']}",
            engine_version=str(result.get("engineVersion") or "") or None,
        )
        written = await self._write(backup, status)
        self._tell(
            backup, db, "Normal", "BackupCompleted", f"backup {backup.name} completed: {message}"
        )
        return written

    # --- the end of a DatabaseBackup's life ---------------------------------------------------

    async def finalize(self, body: Mapping[str, Any]) -> Finalized:
        """Delete the backup's stored data before the DatabaseBackup goes. Done once its
        finalizer may be removed: the data is deleted, there is none, or it is kept because it
        cannot be deleted (an Event says so)."""
        backup = DatabaseBackup.model_validate(dict(body))
        status = backup.status
        if status.location is None or status.destination is None:
            return Finalized(True)  # it never stored anything
        where = _where(status)
        if not state.finished(backup) and status.job:
            # Its Job may still be writing (Running; or Pending, made just before a restart):
            # stop it before deleting what it wrote.
            running = await self.kube.get("Job", backup.namespace, status.job)
            if (
                running is not None
                and _owned_by(running, backup)
                and not state.job_outcome(running).finished
            ):
                uid = running["metadata"]["uid"]
                await self.kube.delete("Job", backup.namespace, status.job, uid)
        stored_in = jobs.store_only(status.destination)
        if problem := await destination_problem(self.kube, backup.namespace, stored_in):
            return self._kept(backup, where, problem)
        name = jobs.delete_job_name(backup)
        job = await self.kube.get("Job", backup.namespace, name)
        if job is None:
            try:
                await self.kube.create(jobs.delete_job(backup, self.options), exist_ok=True)
            except ApiError as error:
                if error.namespace_terminating:
                    # Its namespace is being deleted and nothing runs there any more. The data
                    # stays, as a backup should when everything else goes.
                    return self._kept(backup, where, str(error))
                raise
            return Finalized(False, self._start_deadline())
        outcome = await follow_job(
            self.kube, backup.namespace, job, self.now(), self.options.start_deadline_s
        )
        if outcome.reason == state.NOT_STARTED:
            # Its image cannot be pulled, say: waiting longer would never end. The data stays.
            return self._kept(
                backup, where, f"Job {name} failed ({outcome.reason}): {outcome.message}"
            )
        if outcome.failed:
            await self._not_deleted(backup, where, name, outcome.message)
        elif outcome.finished:
            self.events_for(_ref(backup))(
                "Normal", "BackupDataDeleted", f"deleted the stored backup at {where}"
            )
        elif outcome.waiting:
            await self._say(
                backup,
                f"deleting the stored backup at {where}: Job {name}{state.waiting_note(outcome)}; "
                "then the data is kept and the DatabaseBackup goes",
            )
        return Finalized(outcome.finished and not outcome.failed, outcome.deadline)

    def _kept(self, backup: DatabaseBackup, where: str, why: str) -> Finalized:
        self.events_for(_ref(backup))(
            "Warning", "BackupDataKept", f"kept the stored backup at {where}: {why}"
        )
        get_logger().warning(
            "backup data kept",
            namespace=backup.namespace,
            name=backup.name,
            location=where,
            why=why,
        )
        return Finalized(True)

    async def _say(self, backup: DatabaseBackup, message: str) -> bool:
        """Put ``message`` in the status of a backup being deleted; whether it was new."""
        if backup.status.message == message:
            return False
        await self.kube.patch_status(
            backup.namespace, backup.name, {"message": message}, BACKUP_KIND
        )
        return True

    async def _not_deleted(self, backup: DatabaseBackup, where: str, job: str, why: str) -> None:
        message = (
            f"could not delete the stored backup at {where}: Job {job} failed: {why}. Delete the "
            "Job to try again, or remove the finalizer to keep the data and let the "
            "DatabaseBackup go"
        )
        if await self._say(backup, message):
            self.events_for(_ref(backup))("Warning", "BackupDataNotDeleted", message)
