"""Creating a Database from a backup (``spec.restore``): before its Deployment exists, a Job puts
the backup's data onto its volume.

The reconcile asks `gate` what to do. Until the restore is done it holds the Deployments back
(the credentials Secret, the claim and the Services are made as usual: the Job needs the first
two), so the Database is first Ready with its data — never an empty database that looks
restored. The source is checked first, and a problem is reported on the Database (phase
Failed) rather than restored around: a DatabaseBackup that does not exist, that failed, or of
another engine or a newer major version; a destination whose Secret or claim is missing (its
Job could never start). The fetch step of the Job then checks the stored backup itself — its
metadata, size and SHA-256 against what its DatabaseBackup recorded — and refuses a corrupt or
truncated one, and one stored outside the namespace's prefix (``<path>/<namespace>/``) whose
metadata says another namespace took it (a shared bucket: a namespace never reads another's
backups); its words become the Database's RestoreFailed message. A Job whose pod cannot
start a container (an image it cannot pull, a Secret deleted since) is stopped after the start
deadline and the restore fails, StartDeadlineExceeded, with the kubelet's words: the stopped
Job stays, and says so to every later look, until it is deleted to try again.

Done is remembered twice over: ``status.restoredFrom``, and the primary's Deployment, created
only after the restore. Neither is ever undone, so a restore never runs again over data.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta

from database_operator.api.backup import (
    BackupDestination,
    BackupPhase,
    DatabaseBackup,
    RestoreRecord,
)
from database_operator.api.models import Database
from database_operator.backups import jobs, state
from database_operator.backups.agent import compatible
from database_operator.backups.jobs import JobOptions
from database_operator.backups.observe import destination_problem, follow_job
from database_operator.desired.common import resolved_version
from database_operator.kube.api import KubeApi
from database_operator.manifest import Manifest
from database_operator.ownership import conflict, conflict_message
from database_operator.reasons import Problem, Reason


@dataclass(frozen=True)
class Source:
    """A resolved restore source: where the backup is and what it should hash to."""

    destination: BackupDestination
    location: str
    sha256: str | None = None
    backup: str | None = None
    #: Stored outside the Database's namespace's prefix: restored only if the backup's metadata
    #: says it was taken in this namespace (a shared bucket holds other namespaces' backups).
    belongs_to: str | None = None


@dataclass(frozen=True)
class Gate:
    """What the reconcile does about spec.restore this time."""

    #: Hold the Deployments back: the restore is not done.
    hold: bool = False
    #: Why the Database cannot be restored (phase Failed).
    failure: Problem | None = None
    #: What the restore is doing (Ready False, Progressing True: Restoring).
    progress: Problem | None = None
    #: The restore that completed just now.
    restored: RestoreRecord | None = None
    #: When its Job, whose pod waits to start, is stopped: the Database is looked at then.
    deadline: datetime | None = None


def resolve(db: Database, backups: Mapping[str, DatabaseBackup]) -> Source | Gate:
    """The source ``spec.restore`` names, or the Gate that says why it cannot be used (yet)."""
    restore = db.spec.restore
    assert restore is not None
    if restore.location is not None:
        destination = restore.destination or (
            db.spec.backup.destination if db.spec.backup else None
        )
        assert destination is not None  # the schema refuses a location without one
        own = restore.location.startswith(state.namespace_prefix(destination, db.namespace))
        return Source(destination, restore.location, belongs_to=None if own else db.namespace)
    name = str(restore.backup)
    found = backups.get(name)
    if found is None:
        return Gate(
            hold=True,
            failure=Problem(
                Reason.RESTORE_SOURCE_NOT_FOUND,
                f"spec.restore.backup: DatabaseBackup {name!r} does not exist in namespace "
                f"{db.namespace!r}",
            ),
        )
    if found.status.phase is BackupPhase.FAILED:
        return Gate(
            hold=True,
            failure=Problem(
                Reason.RESTORE_SOURCE_NOT_COMPLETED,
                f"spec.restore.backup: DatabaseBackup {name!r} failed, so it holds nothing to "
                f"restore ({found.status.message or 'see its status'})",
            ),
        )
    if found.status.phase is not BackupPhase.COMPLETED or found.status.destination is None:
        return Gate(
            hold=True,
            progress=Problem(Reason.RESTORING, f"waiting for DatabaseBackup {name!r} to complete"),
        )
    stored = {"engine": found.status.engine, "engineVersion": found.status.engine_version}
    if why := compatible(db.spec.engine.value, resolved_version(db), stored):
        return Gate(
            hold=True,
            failure=Problem(
                Reason.RESTORE_SOURCE_INCOMPATIBLE,
                f"spec.restore.backup: DatabaseBackup {name!r} cannot be restored into this "
                f"Database: {why}",
            ),
        )
    sha256 = (found.status.checksum or "").removeprefix("sha256:") or None
    return Source(found.status.destination, str(found.status.location), sha256, name)


async def gate(
    kube: KubeApi,
    db: Database,
    backups: Mapping[str, DatabaseBackup],
    *,
    primary: Manifest | None,
    options: JobOptions,
    now: datetime,
) -> Gate:
    """Whether the Deployments may be made; starts and follows the restore Job meanwhile."""
    if db.spec.restore is None or db.status.restored_from is not None or primary is not None:
        return Gate()
    source = resolve(db, backups)
    if isinstance(source, Gate):
        return source
    return await _follow(kube, db, source, options, now)


async def _restore_job(
    kube: KubeApi, db: Database, source: Source, options: JobOptions
) -> Manifest | Problem | None:
    """The restore Job, created if there is none (None: created just now, or not to be seen
    yet); a Problem if it cannot be."""
    name = jobs.restore_job_name(db)
    job = await kube.get("Job", db.namespace, name)
    if job is not None:
        return job
    # Checked before the Job is made; a Job made already says itself what it misses.
    if problem := await destination_problem(kube, db.namespace, source.destination):
        return Problem(Reason.DESTINATION_NOT_FOUND, problem)
    manifest = jobs.restore_job(
        db,
        source.destination,
        source.location,
        source.sha256,
        options,
        belongs_to=source.belongs_to,
    )
    if await kube.create(manifest, exist_ok=True) is not None:
        return None
    # A namesake the watch does not show (not labelled as ours), or ours a moment early.
    return await kube.get_live("Job", db.namespace, name)


async def _follow(
    kube: KubeApi, db: Database, source: Source, options: JobOptions, now: datetime
) -> Gate:
    """Start the restore Job, or say what it is doing, why it failed, or what it restored."""
    what = f"DatabaseBackup {source.backup}" if source.backup else source.location
    name = jobs.restore_job_name(db)
    job = await _restore_job(kube, db, source, options)
    if isinstance(job, Problem):
        return Gate(hold=True, failure=job)
    if job is None:  # made just now: followed until its pod starts (it may never make one)
        return Gate(
            hold=True,
            progress=Problem(Reason.RESTORING, f"restoring {what}: Job {name}"),
            deadline=now + timedelta(seconds=options.start_deadline_s),
        )
    if (clash := conflict(job, db)) is not None:
        return Gate(
            hold=True, failure=Problem(Reason.CHILD_NAME_CONFLICT, conflict_message([clash]))
        )
    outcome = await follow_job(kube, db.namespace, job, now, options.start_deadline_s)
    if outcome.failed:
        why = f"restoring {what} failed (Job {name}, {outcome.reason}): {outcome.message}"
        reason = (
            Reason.START_DEADLINE_EXCEEDED
            if outcome.reason == state.NOT_STARTED
            else Reason.RESTORE_FAILED
        )
        return Gate(hold=True, failure=Problem(reason, why))
    if not outcome.finished:
        note = state.waiting_note(outcome)
        return Gate(
            hold=True,
            progress=Problem(Reason.RESTORING, f"restoring {what}: Job {name}{note}"),
            deadline=outcome.deadline,
        )
    return Gate(
        restored=RestoreRecord(
            backup=source.backup, location=source.location, time=outcome.finished_at
        )
    )
