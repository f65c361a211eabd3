"""What a backup's status says, from what was observed: pure, no I/O, no clock of its own.

- `job_outcome`: what a Job of the operator's (a backup, a restore, a deletion) and its pods
  report: still running, or waiting to start a container and why (`waiting`: not scheduled, an
  image it cannot pull, a Secret gone); done, with the agent's result; failed, and the
  containers' last words — or not started by the start deadline: then the Job is to be stopped
  (suspended, and annotated with why, so that a look at it later reads the same failure).
- `advance`: a DatabaseBackup's next status — its phase, the fields of that phase, and its two
  conditions, ``Completed`` and ``Failed`` (like a batch Job's), stamped with its generation.
- `summarize`: what a Database's status says of its backups — the newest that completed and
  that failed (the failure stays once that backup is deleted: retention deletes a failed backup
  when a later one completed, and the last failure's time is what its gauge and alerts read),
  and its ``BackupHealthy`` condition:

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

from database_operator import cron
from database_operator.api.backup import (
    SCHEDULED_AT_ANNOTATION,
    BackupDestination,
    BackupPhase,
    BackupRecord,
    DatabaseBackup,
    DatabaseBackupStatus,
)
from database_operator.api.common import GROUP, ConditionStatus
from database_operator.api.models import Database
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
#: The annotation on a Job the operator stopped (spec.suspend) because its pod did not start
#: by the start deadline: why, as the failure's message says it.
STOPPED_ANNOTATION = f"{GROUP}/stopped"
#: A Job's failure reason (beside Kubernetes' own, e.g. DeadlineExceeded) when its pod did not
#: start a container by the start deadline.
NOT_STARTED = str(Reason.START_DEADLINE_EXCEEDED)
#: How often a Job whose pod waits to start is looked at until its start deadline: no watch
#: event says when the pod's reason changes (the operator watches Jobs, not their pods).
WAITING_LOOK_S = 5.0
#: What a container waits for while it starts as it should: not a problem to report (yet).
STARTING = frozenset({"ContainerCreating", "PodInitializing"})
#: A pod that is done: the Job controller makes the next one, or the Job finishes.
ENDED_PHASES = frozenset({"Succeeded", "Failed"})


# --- the Job ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class JobOutcome:
    """What a Job and its pods say."""

    finished: bool = False
    failed: bool = False
    #: What the agent reported (its termination message, JSON), once the Job completed.
    result: dict[str, Any] | None = None
    #: Why it failed: the Job's condition reason (NOT_STARTED: the start deadline passed), and
    #: the pods' last words.
    reason: str = ""
    message: str = ""
    finished_at: datetime | None = None
    #: Not finished: what keeps its pod from starting, as the scheduler or the kubelet says it
    #: ("" while nothing is wrong), and when the Job is stopped if it still waits then.
    waiting: str = ""
    deadline: datetime | None = None
    #: Failed for NOT_STARTED just now: the caller stops the Job (stopped_job_patch).
    stop: bool = False


@dataclass(frozen=True)
class Waiting:
    """A Job's pod that has not started its current container: since when it waits, and why."""

    since: datetime
    why: str
    #: Something is wrong (an image pull, a Secret, no node), not a container being created.
    problem: bool = True


def _condition(job: Manifest, type_: str) -> Manifest | None:
    for found in (job.get("status") or {}).get("conditions") or []:
        if found.get("type") == type_ and found.get("status") == "True":
            return dict(found)
    return None


def _statuses(pod: Manifest) -> list[Manifest]:
    """A pod's containers' statuses in the order they run: init containers first."""
    status = pod.get("status") or {}
    return [*status.get("initContainerStatuses", []), *status.get("containerStatuses", [])]


def _terminated(pod: Manifest) -> list[tuple[str, Manifest]]:
    return [
        (str(c.get("name")), c["state"]["terminated"])
        for c in _statuses(pod)
        if (c.get("state") or {}).get("terminated")
    ]


def _time(text: object) -> datetime | None:
    if not isinstance(text, str):
        return None
    try:
        return datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None


def _pod_waiting(pod: Manifest) -> Waiting | None:
    """What keeps a pod that has not ended from running its current container (None: it runs
    one, or the kubelet has not said)."""
    meta, status = pod.get("metadata") or {}, pod.get("status") or {}
    name = meta.get("name", "?")
    created = _time(meta.get("creationTimestamp"))
    for condition in status.get("conditions") or []:
        if condition.get("type") == "PodScheduled" and condition.get("status") == "False":
            since = created or _time(condition.get("lastTransitionTime"))
            why = f"pod {name} {condition.get('reason') or 'Unschedulable'}"
            text = f"{why}: {condition.get('message')}" if condition.get("message") else why
            return Waiting(since, _last_words(text)) if since else None
    containers = _statuses(pod)
    if any("running" in (c.get("state") or {}) for c in containers):
        return None
    # A container's turn comes when the one before it ended (init containers run in order).
    ended = [
        found
        for c in containers
        if (found := _time(((c.get("state") or {}).get("terminated") or {}).get("finishedAt")))
    ]
    since = max(ended, default=None) or _time(status.get("startTime")) or created
    if since is None:
        return None
    for c in containers:
        if "waiting" not in (c.get("state") or {}):
            continue
        waiting = c["state"]["waiting"] or {}
        reason = str(waiting.get("reason") or "Waiting")
        why = f"{c.get('name')}: {reason}"
        text = f"{why}: {waiting['message']}" if waiting.get("message") else why
        return Waiting(since, _last_words(text), problem=reason not in STARTING)
    if containers and all("terminated" in (c.get("state") or {}) for c in containers):
        return None  # every container ended: the pod's phase follows
    return Waiting(since, f"pod {name} is {status.get('phase') or 'Pending'}", problem=False)


def _created(obj: Manifest) -> datetime:
    return _time((obj.get("metadata") or {}).get("creationTimestamp")) or datetime.min.replace(
        tzinfo=UTC
    )


def waiting(job: Manifest, pods: Sequence[Manifest]) -> Waiting | None:
    """What a Job that has not finished waits for: its newest pod not scheduled, or one of its
    containers not started (counted from when that container's turn came), or no pod at all
    (counted from the Job's creation). None while a container runs, and between a pod that
    ended and the next one (the Job controller's move, within its backoff limit)."""
    alive = [
        pod
        for pod in pods
        if (pod.get("status") or {}).get("phase") not in ENDED_PHASES
        and not (pod.get("metadata") or {}).get("deletionTimestamp")
    ]
    if alive:
        return _pod_waiting(max(alive, key=_created))
    status = job.get("status") or {}
    if pods or status.get("failed") or status.get("succeeded"):
        return None
    since = _time((job.get("metadata") or {}).get("creationTimestamp"))
    if since is None:
        return None
    name = (job.get("metadata") or {}).get("name", "?")
    return Waiting(
        since,
        f"Job {name} has made no pod (kubectl describe job {name}: a ResourceQuota or an "
        "admission policy may refuse it)",
        problem=False,
    )


def stopped_job_patch(outcome: JobOutcome) -> Manifest:
    """The merge patch that stops a Job whose pod did not start: suspended (the Job controller
    deletes its pods and makes none), and annotated with why."""
    return {
        "metadata": {"annotations": {STOPPED_ANNOTATION: outcome.message}},
        "spec": {"suspend": True},
    }


def _unfinished(
    job: Manifest, pods: Sequence[Manifest], now: datetime, start_deadline: timedelta
) -> JobOutcome:
    """A Job that has not finished: running, waiting (and why), or not started in time."""
    found = waiting(job, pods)
    if found is None:
        return JobOutcome()
    deadline = found.since + start_deadline
    if now < deadline:
        return JobOutcome(waiting=found.why if found.problem else "", deadline=deadline)
    return JobOutcome(
        True,
        True,
        reason=NOT_STARTED,
        message=f"its pod did not start within {start_deadline.total_seconds():g} s: {found.why}",
        finished_at=now,
        stop=True,
    )


def job_outcome(
    job: Manifest,
    pods: Sequence[Manifest] = (),
    now: datetime | None = None,
    start_deadline: timedelta | None = None,
) -> JobOutcome:
    """Read a Job and its pods: the agent's result, or why it failed. Given ``now`` and the
    ``start_deadline``, a Job whose pod waits to start a container says why (``waiting``), and
    fails once it has waited longer than the deadline (``stop``: the caller stops it)."""
    stopped = ((job.get("metadata") or {}).get("annotations") or {}).get(STOPPED_ANNOTATION)
    if stopped is not None:
        return JobOutcome(True, True, reason=NOT_STARTED, message=str(stopped))
    done, failed = _condition(job, "Complete"), _condition(job, "Failed")
    if done is None and failed is None:
        if now is None or start_deadline is None:
            return JobOutcome()
        return _unfinished(job, pods, now, start_deadline)
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


def waiting_note(outcome: JobOutcome) -> str:
    """What a status message adds while a Job's pod waits with a problem ("" otherwise): why,
    and when the Job is stopped (a time, never "in N s": a status that does not change costs
    no write)."""
    if not outcome.waiting:
        return ""
    return (
        f"; its pod waits: {outcome.waiting} (stopped at {_stamp(outcome.deadline)} if it still "
        "waits then)"
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


def namespace_prefix(destination: BackupDestination, namespace: str) -> str:
    """Where the backups taken in ``namespace`` are stored in ``destination``: <path>/<ns>/."""
    parts = [destination_prefix(destination) or "", namespace]
    return "/".join(part.strip("/") for part in parts if part) + "/"


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


def _last_failure(db: Database, found: BackupRecord | None) -> BackupRecord | None:
    """The newest failure: of the failed backups there are, or the one the status names if it
    is newer (that backup deleted since, by retention or by hand)."""
    kept = db.status.last_failed_backup
    if kept is not None and (found is None or kept.time > found.time):
        return kept
    return found


def summarize(db: Database, backups: Sequence[DatabaseBackup], now: datetime) -> BackupSummary:
    """The backup fields of a Database's status (see the module docstring)."""
    mine = of_database(db, backups)
    success, failure = _newest(mine, BackupPhase.COMPLETED), _newest(mine, BackupPhase.FAILED)
    summary = BackupSummary(_record(success), _last_failure(db, _record(failure)))
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
