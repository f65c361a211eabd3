"""What a backup's status says, from what was observed: pure, no I/O, no clock of its own.

- `job_outcome`: what a backup's Job and its pods report (still running; done, with the agent's
  result; failed, and the containers' last words).
- `advance`: a DatabaseBackup's next status — its phase, the fields of that phase, and its two
  conditions, ``Completed`` and ``Failed`` (like a batch Job's), stamped with its generation.
- `summarize`: what a Database's status says of its backups — the newest that completed and
  that failed, and its ``BackupHealthy`` condition:

  ====================================================  =======  =====================
  when (spec.backup set; rows checked top to bottom)     status   reason
  ====================================================  =======  =====================
  the schedule is suspended                              False    BackupsSuspended
  the newest finished (scheduled, with a schedule) one   False    LastBackupFailed
  failed
  a schedule, and nothing completed within two of its    False    NoRecentBackup
  periods (counted from the newest completion, else
  from the first scheduled backup)
  a backup completed                                     True     LastBackupSucceeded
  otherwise                                              Unknown  NoBackupYet
  ====================================================  =======  =====================

Messages name backups and times, never "how long ago": a status that does not change costs no
write.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from database_operator.api.backup import (
    SCHEDULED_AT_ANNOTATION,
    BackupDestination,
    BackupPhase,
    BackupRecord,
    DatabaseBackup,
    DatabaseBackupStatus,
)
from database_operator.api.common import ConditionStatus
from database_operator.api.models import Database
from database_operator.backups import cron
from database_operator.conditions import Verdict, false, stamped, true, whole_seconds
from database_operator.manifest import Manifest
from database_operator.reasons import Reason

COMPLETED = "Completed"
FAILED = "Failed"
BACKUP_HEALTHY = "BackupHealthy"
#: The agent's container in the backup Job: its termination message is the result.
UPLOAD_CONTAINER = "upload"
#: Of the containers' last words, this much goes into a message (the status holds 32 KiB).
MAX_WORDS = 2000


# --- the Job ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class JobOutcome:
    """What a Job and its pods say."""

    finished: bool = False
    failed: bool = False
    #: What the agent reported (its termination message, JSON), once the Job completed.
    result: dict[str, Any] | None = None
    #: Why it failed: the Job's condition reason, and the pods' last words.
    reason: str = ""
    message: str = ""
    finished_at: datetime | None = None


def _condition(job: Manifest, type_: str) -> Manifest | None:
    for found in (job.get("status") or {}).get("conditions") or []:
        if found.get("type") == type_ and found.get("status") == "True":
            return dict(found)
    return None


def _terminated(pod: Manifest) -> list[tuple[str, Manifest]]:
    status = pod.get("status") or {}
    containers = [*status.get("initContainerStatuses", []), *status.get("containerStatuses", [])]
    return [
        (str(c.get("name")), c["state"]["terminated"])
        for c in containers
        if (c.get("state") or {}).get("terminated")
    ]


def _time(text: object) -> datetime | None:
    if not isinstance(text, str):
        return None
    try:
        return datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None


def job_outcome(job: Manifest, pods: Sequence[Manifest] = ()) -> JobOutcome:
    """Read a Job (and, once it finished, its pods): the agent's result, or why it failed."""
    done, failed = _condition(job, "Complete"), _condition(job, "Failed")
    if done is None and failed is None:
        return JobOutcome()
    status = job.get("status") or {}
    if done is not None:
        for pod in pods:
            for name, terminated in _terminated(pod):
                if name == UPLOAD_CONTAINER and terminated.get("exitCode") == 0:
                    try:
                        result = json.loads(terminated.get("message") or "")
                    except ValueError:
                        continue
                    if isinstance(result, dict):
                        finished = _time(status.get("completionTime"))
                        return JobOutcome(True, False, result, finished_at=finished)
        return JobOutcome(True, False, None, finished_at=_time(status.get("completionTime")))
    assert failed is not None
    words = []
    for pod in pods:
        for name, terminated in _terminated(pod):
            if terminated.get("exitCode") not in (0, None) and terminated.get("message"):
                words.append(f"{name}: {_last_words(str(terminated['message']))}")
    why = f"{failed.get('reason', 'Failed')}: {failed.get('message', '')}".strip(": ")
    message = "; ".join(dict.fromkeys(words)) or why  # each container's words once
    return JobOutcome(
        True,
        True,
        reason=str(failed.get("reason") or "Failed"),
        message=message,
        finished_at=_time(failed.get("lastTransitionTime")),
    )


def _last_words(text: str) -> str:
    """A container's termination message, for people: the agent's JSON error, else the end of
    a script's log."""
    try:
        found = json.loads(text)
    except ValueError:
        found = None
    if isinstance(found, dict) and found.get("error"):
        text = str(found["error"])
    text = " ".join(text.split())
    return text if len(text) <= MAX_WORDS else "…" + text[-MAX_WORDS:]


# --- a DatabaseBackup's status -----------------------------------------------------------------


def advance(
    backup: DatabaseBackup,
    phase: BackupPhase,
    reason: Reason,
    message: str,
    now: datetime,
    **fields: Any,
) -> DatabaseBackupStatus:
    """``backup``'s status in ``phase``, with ``fields`` set (e.g. location) and its conditions
    saying ``reason`` and ``message``."""
    done = phase is BackupPhase.COMPLETED
    failed = phase is BackupPhase.FAILED
    verdicts: dict[str, Verdict | None] = {
        COMPLETED: true(reason, message) if done else false(reason, message),
        FAILED: true(reason, message) if failed else false(Reason.AS_EXPECTED, ""),
    }
    generation = backup.metadata.get("generation")
    return backup.status.model_copy(
        update={
            "observed_generation": generation,
            "phase": phase,
            "message": message,
            "conditions": stamped(
                backup.status.conditions,
                verdicts,
                generation if isinstance(generation, int) else None,
                now,
            ),
            **fields,
        }
    )


def finished(backup: DatabaseBackup) -> bool:
    return backup.status.phase in (BackupPhase.COMPLETED, BackupPhase.FAILED)


def location(prefix: str | None, backup: DatabaseBackup, extension: str) -> str:
    """Where a backup is stored in its destination: <path>/<namespace>/<database>/<name>.<ext>."""
    parts = [prefix or "", backup.namespace, backup.spec.database, f"{backup.name}.{extension}"]
    return "/".join(part.strip("/") for part in parts if part)


def destination_prefix(destination: BackupDestination) -> str | None:
    return destination.s3.path if destination.s3 is not None else None


# --- a Database's backups ------------------------------------------------------------------------


def scheduled_at(backup: DatabaseBackup) -> datetime:
    """The due time a scheduled backup was taken for (else: when it was created)."""
    annotations = backup.metadata.get("annotations") or {}
    found = _time(annotations.get(SCHEDULED_AT_ANNOTATION)) or _time(
        backup.metadata.get("creationTimestamp")
    )
    return found or datetime.min.replace(tzinfo=UTC)


def of_database(db: Database, backups: Sequence[DatabaseBackup]) -> list[DatabaseBackup]:
    """The backups taken of this very Database (its uid): a namesake's before it do not count."""
    uid = db.metadata.get("uid")
    return [b for b in backups if b.spec.database == db.name and b.status.database_uid == uid]


@dataclass(frozen=True)
class Backups:
    """The DatabaseBackups one Database's reconcile looks at, as the watch has them."""

    #: Those of this Database (spec.database is its name).
    of_database: Sequence[DatabaseBackup] = ()
    #: The namespace's, by name: where spec.restore.backup is looked up.
    named: Mapping[str, DatabaseBackup] = field(default_factory=dict)


@dataclass(frozen=True)
class BackupSummary:
    """What a Database's status says of its backups (``health`` None: no spec.backup)."""

    last_success: BackupRecord | None = None
    last_failure: BackupRecord | None = None
    health: Verdict | None = None
    #: The schedule's period now (None: no schedule, or suspended): for the metrics.
    period: timedelta | None = None


def _newest(backups: Sequence[DatabaseBackup], phase: BackupPhase) -> DatabaseBackup | None:
    done = [b for b in backups if b.status.phase is phase and b.status.completed_at is not None]
    return max(done, key=lambda b: (b.status.completed_at, b.name), default=None)


def _record(backup: DatabaseBackup | None) -> BackupRecord | None:
    if backup is None or backup.status.completed_at is None:
        return None
    return BackupRecord(name=backup.name, time=backup.status.completed_at)


def summarize(db: Database, backups: Sequence[DatabaseBackup], now: datetime) -> BackupSummary:
    """The backup fields of a Database's status (see the module docstring)."""
    mine = of_database(db, backups)
    success, failure = _newest(mine, BackupPhase.COMPLETED), _newest(mine, BackupPhase.FAILED)
    summary = BackupSummary(_record(success), _record(failure))
    policy = db.spec.backup
    if policy is None:
        return summary
    if policy.schedule and policy.suspend:
        verdict = false(
            Reason.BACKUPS_SUSPENDED, "spec.backup.suspend is true: the schedule takes no backups"
        )
        return BackupSummary(summary.last_success, summary.last_failure, verdict)
    counted = [b for b in mine if b.scheduled] if policy.schedule else mine
    newest = max(
        (b for b in counted if finished(b) and b.status.completed_at is not None),
        key=lambda b: (b.status.completed_at, b.name),
        default=None,
    )
    period = cron.parse(policy.schedule).period_at(now) if policy.schedule else None
    verdict = _health(
        newest=newest,
        success=success,
        scheduled=counted,
        schedule=policy.schedule,
        period=period,
        now=now,
    )
    return BackupSummary(summary.last_success, summary.last_failure, verdict, period)


def _health(
    *,
    newest: DatabaseBackup | None,
    success: DatabaseBackup | None,
    scheduled: Sequence[DatabaseBackup],
    schedule: str | None,
    period: timedelta | None,
    now: datetime,
) -> Verdict:
    if newest is not None and newest.status.phase is BackupPhase.FAILED:
        when = _stamp(newest.status.completed_at)
        why = f": {newest.status.message}" if newest.status.message else ""
        return false(Reason.LAST_BACKUP_FAILED, f"{newest.name} failed at {when}{why}")
    if schedule and period is not None:
        since = success.status.completed_at if success is not None else None
        if since is None:
            since = min((scheduled_at(b) for b in scheduled), default=None)
        if since is not None and now - since > 2 * period:
            return false(
                Reason.NO_RECENT_BACKUP,
                f"no backup has completed since {_stamp(since)}: more than two periods of "
                f"the schedule {schedule!r}",
            )
    if success is not None:
        return true(
            Reason.LAST_BACKUP_SUCCEEDED,
            f"{success.name} completed at {_stamp(success.status.completed_at)}",
        )
    return Verdict(ConditionStatus.UNKNOWN, Reason.NO_BACKUP_YET, "no backup has finished yet")


def _stamp(when: datetime | None) -> str:
    return whole_seconds(when).strftime("%Y-%m-%dT%H:%M:%SZ") if when else "?"
