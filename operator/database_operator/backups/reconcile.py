"""One DatabaseBackup's reconcile, and the end of its life.

- New or Pending: check what the backup needs — its Database, a destination whose Secret and
  claim exist (a Job missing them would wait forever instead of failing), a primary that serves,
  no other backup of the Database running — then create its Job and say Running; or say why it
  waits, or why it failed.
- Running: follow the Job; once it finished, read what the agent stored (its termination
  message) or why it failed (the containers' last words), and say Completed or Failed.
- Completed and Failed are final: nothing is read or written for them again.
- Deleted: its stored data goes first (a Job of the agent deletes it), then the finalizer. When
  that cannot be done — the namespace is being deleted, or the destination's Secret is gone —
  the data is kept, and an Event on the DatabaseBackup says where.

Events on the Database say when a backup starts, completes or fails.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from database_operator.api.backup import (
    BACKUP_KIND,
    BackupDestination,
    BackupPhase,
    DatabaseBackup,
    DatabaseBackupStatus,
)
from database_operator.api.models import Database
from database_operator.backups import jobs, recipes, state
from database_operator.backups.observe import destination_problem, job_result
from database_operator.clock import Clock
from database_operator.events import EventSink
from database_operator.kube import ApiError, KubeApi
from database_operator.manifest import Manifest
from database_operator.reasons import Reason
from database_operator.reconcile import merge_patch_of

#: Gives the EventSink of an object (a DatabaseBackup, or its Database).
EventsFor = Callable[[Manifest], EventSink]
#: The API server's words for a namespace being deleted: nothing new may be created in it.
TERMINATING = "is being terminated"


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


def _ref(obj: DatabaseBackup | Database) -> Manifest:
    """What an Event needs to name ``obj``."""
    return {"apiVersion": obj.api_version, "kind": obj.kind, "metadata": obj.metadata}


def _owned_by(obj: Manifest, backup: DatabaseBackup) -> bool:
    refs = obj.get("metadata", {}).get("ownerReferences") or []
    uid = backup.metadata.get("uid")
    return any(ref.get("controller") and ref.get("uid") == uid for ref in refs)


@dataclass
class BackupReconciler:
    """Reconciles DatabaseBackups: the API, where Events go, the clock, the agent's image."""

    kube: KubeApi
    events_for: EventsFor
    now: Clock
    agent_image: str

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

    async def _start(
        self, backup: DatabaseBackup, db: Database | None, running: Sequence[str]
    ) -> BackupResult:
        found = self._obstacle(backup, db)
        if isinstance(found, tuple):
            return await self._fail(backup, db, *found)
        assert db is not None
        destination = found
        if problem := await destination_problem(self.kube, backup.namespace, destination):
            return await self._fail(backup, db, Reason.DESTINATION_NOT_FOUND, problem)
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
        manifest = jobs.backup_job(backup, db, destination, location, self.agent_image)
        job_name = manifest["metadata"]["name"]
        if await self.kube.create(manifest, exist_ok=True) is None:
            existing = await self.kube.get_live("Job", backup.namespace, job_name)
            if existing is not None and not _owned_by(existing, backup):
                why = (
                    f"Job {job_name!r} exists and the operator did not create it for this "
                    "backup: it does not take over objects it did not create; delete that Job, "
                    "or create the backup under another name"
                )
                return await self._fail(backup, db, Reason.CHILD_NAME_CONFLICT, why)
        where = f"{destination.describe()}: {location}"
        at = self.now()
        status = state.advance(
            backup,
            BackupPhase.RUNNING,
            Reason.BACKUP_RUNNING,
            f"Job {job_name} is backing up Database {name} to {where}",
            at,
            started_at=at,
            location=location,
            destination=destination,
            engine=db.spec.engine.value,
            database_uid=db.metadata.get("uid"),
            job=job_name,
        )
        result = await self._write(backup, status)
        text = f"backup {backup.name} started: Job {job_name}, to {where}"
        self._tell(backup, db, "Normal", "BackupStarted", text)
        return result

    async def _follow(self, backup: DatabaseBackup, db: Database | None) -> BackupResult:
        job_name = backup.status.job or jobs.backup_job_name(backup)
        job = await self.kube.get("Job", backup.namespace, job_name)
        if job is None:
            why = f"its Job {job_name} was deleted before it finished"
            return await self._fail(backup, db, Reason.BACKUP_JOB_LOST, why)
        outcome = await job_result(self.kube, backup.namespace, job)
        if not outcome.finished:
            return BackupResult(backup.status)
        if outcome.failed:
            message = f"Job {job_name} failed ({outcome.reason}): {outcome.message}"
            return await self._fail(backup, db, Reason.BACKUP_JOB_FAILED, message)
        result = outcome.result or {}
        if not isinstance(result.get("size"), int) or not result.get("sha256"):
            why = f"its Job {job_name} succeeded but did not report what it stored"
            return await self._fail(backup, db, Reason.BACKUP_JOB_LOST, why)
        destination = backup.status.destination
        where = f"{destination.describe()}: {backup.status.location}" if destination else ""
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

    async def finalize(self, body: Mapping[str, Any]) -> bool:
        """Delete the backup's stored data before the DatabaseBackup goes. True once its
        finalizer may be removed: the data is deleted, there is none, or it is kept because it
        cannot be deleted (an Event says so)."""
        backup = DatabaseBackup.model_validate(dict(body))
        status = backup.status
        if status.location is None or status.destination is None:
            return True  # it never stored anything
        where = f"{status.destination.describe()}: {status.location}"
        if status.phase is BackupPhase.RUNNING and status.job:
            # Its Job may still be writing: stop it before deleting what it wrote.
            running = await self.kube.get("Job", backup.namespace, status.job)
            if running is not None and not state.job_outcome(running).finished:
                uid = running["metadata"]["uid"]
                await self.kube.delete("Job", backup.namespace, status.job, uid)
        if problem := await destination_problem(self.kube, backup.namespace, status.destination):
            return self._kept(backup, where, problem)
        name = jobs.delete_job_name(backup)
        job = await self.kube.get("Job", backup.namespace, name)
        if job is None:
            try:
                await self.kube.create(jobs.delete_job(backup, self.agent_image), exist_ok=True)
            except ApiError as error:
                if error.status == 403 and TERMINATING in error.message:
                    # Its namespace is being deleted and nothing runs there any more. The data
                    # stays, as a backup should when everything else goes.
                    return self._kept(backup, where, str(error))
                raise
            return False
        outcome = await job_result(self.kube, backup.namespace, job)
        if outcome.failed:
            await self._not_deleted(backup, where, name, outcome.message)
        elif outcome.finished:
            self.events_for(_ref(backup))(
                "Normal", "BackupDataDeleted", f"deleted the stored backup at {where}"
            )
        return outcome.finished and not outcome.failed

    def _kept(self, backup: DatabaseBackup, where: str, why: str) -> bool:
        self.events_for(_ref(backup))(
            "Warning", "BackupDataKept", f"kept the stored backup at {where}: {why}"
        )
        return True

    async def _not_deleted(self, backup: DatabaseBackup, where: str, job: str, why: str) -> None:
        message = (
            f"could not delete the stored backup at {where}: Job {job} failed: {why}. Delete the "
            "Job to try again, or remove the finalizer to keep the data and let the "
            "DatabaseBackup go"
        )
        if backup.status.message != message:
            self.events_for(_ref(backup))("Warning", "BackupDataNotDeleted", message)
            await self.kube.patch_status(
                backup.namespace, backup.name, {"message": message}, BACKUP_KIND
            )
