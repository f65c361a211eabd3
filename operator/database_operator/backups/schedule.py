"""A Database's backup schedule, kept by the operator itself: at each due time of
``spec.backup.schedule`` it creates a DatabaseBackup, and it deletes those retention lets go.

Why not a CronJob (as Oracle's mysql-operator does): a CronJob's pod would need the operator's
image, a ServiceAccount and RBAC to create DatabaseBackups, and one more object per Database to
keep in step with the spec; here the Database's own reconcile is woken at the next due time (the
work queue's schedule), and a missed time is made up once when the operator is back.

A scheduled backup is named after its due time, ``<database>-<YYYYMMDD>-<HHMMSS>`` (UTC), so a
second look at the same due time — a retry, a restart, another replica after a failover — finds
it instead of taking another: creating it again is refused (409) and nothing happens. Only the
latest due time counts (an operator that was away takes one backup, not one per missed time),
never one from before the Database existed, and none while a backup of the Database is still
unfinished (like a CronJob's concurrencyPolicy Forbid: that due time is skipped).
DatabaseBackups carry no owner reference to the Database: they, and their data, outlive it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime

from database_operator import cron
from database_operator.api.backup import (
    BACKUP_KIND,
    DATABASE_LABEL,
    ORIGIN_LABEL,
    SCHEDULED,
    SCHEDULED_AT_ANNOTATION,
    DatabaseBackup,
)
from database_operator.api.common import GROUP, VERSION
from database_operator.api.models import SHARD_LABEL, Database
from database_operator.backups import retention, state
from database_operator.kube.api import KubeApi
from database_operator.manifest import Manifest


@dataclass
class Tended:
    """What the schedule did for one Database."""

    created: list[str] = field(default_factory=list)
    deleted: list[str] = field(default_factory=list)
    #: When the schedule is next due (None: no schedule, or suspended).
    next_due: datetime | None = None


def scheduled_name(db: Database, due: datetime) -> str:
    return f"{db.name}-{due.astimezone(UTC):%Y%m%d-%H%M%S}"


def backup_for(db: Database, at: datetime, *, scheduled: bool) -> Manifest:
    """A DatabaseBackup of ``db`` named after ``at``: the schedule's for a due time, or one
    taken on demand (the kubectl plugin's). Labelled with its Database and the Database's shard
    (an operator of a shard watches only what carries it); the schedule's also with its origin
    and due time (retention counts only those)."""
    labels = {DATABASE_LABEL: db.name}
    shard = (db.metadata.get("labels") or {}).get(SHARD_LABEL)
    metadata: Manifest = {
        "name": scheduled_name(db, at),
        "namespace": db.namespace,
        "labels": labels
        | ({ORIGIN_LABEL: SCHEDULED} if scheduled else {})
        | ({SHARD_LABEL: shard} if shard else {}),
    }
    if scheduled:
        metadata["annotations"] = {
            SCHEDULED_AT_ANNOTATION: f"{at.astimezone(UTC):%Y-%m-%dT%H:%M:%SZ}"
        }
    return {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": BACKUP_KIND,
        "metadata": metadata,
        "spec": {"database": db.name},
    }


def _created(db: Database) -> datetime | None:
    text = db.metadata.get("creationTimestamp")
    if not isinstance(text, str):
        return None
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


def due_now(db: Database, backups: Sequence[DatabaseBackup], now: datetime) -> datetime | None:
    """The due time a backup must be taken for now, if none was yet (None: nothing to do).

    Not while another backup of the Database is unfinished: a due time comes again, and a
    Database that cannot be backed up (its primary down for a day) must not pile up a backup
    per due time meanwhile (BackupHealthy says NoRecentBackup instead)."""
    policy = db.spec.backup
    if policy is None or not policy.schedule or policy.suspend:
        return None
    due = cron.parse(policy.schedule).previous_at_or_before(now)
    created = _created(db)
    if created is not None and due < created.replace(microsecond=0):
        return None
    name = scheduled_name(db, due)
    mine = [b for b in backups if b.spec.database == db.name]
    busy = any(not state.finished(b) and not b.metadata.get("deletionTimestamp") for b in mine)
    return None if busy or any(b.name == name for b in mine) else due


def expired(db: Database, backups: Sequence[DatabaseBackup], now: datetime) -> list[DatabaseBackup]:
    """The scheduled backups of this Database that retention deletes now."""
    policy = db.spec.backup
    if policy is None or policy.retention is None:
        return []
    mine = [b for b in state.of_database(db, backups) if b.scheduled]
    names = set(
        retention.expired(
            [
                retention.Scheduled(
                    b.name, state.scheduled_at(b), b.status.phase, b.status.completed_at
                )
                for b in mine
                if not b.metadata.get("deletionTimestamp")
            ],
            policy.retention,
            now,
        )
    )
    return [b for b in mine if b.name in names]


async def tend(
    kube: KubeApi, db: Database, backups: Sequence[DatabaseBackup], now: datetime
) -> Tended:
    """Take the backup that is due, delete those retention lets go (their finalizer deletes
    their data first), and say when the schedule is next due."""
    done = Tended()
    policy = db.spec.backup
    if policy is None or not policy.schedule:
        return done
    if not policy.suspend:
        done.next_due = cron.parse(policy.schedule).next_after(now)
    if (due := due_now(db, backups, now)) is not None:
        manifest = backup_for(db, due, scheduled=True)
        if await kube.create(manifest, exist_ok=True) is not None:
            done.created.append(manifest["metadata"]["name"])
    for backup in expired(db, backups, now):
        if await kube.delete(
            BACKUP_KIND, backup.namespace, backup.name, str(backup.metadata.get("uid", ""))
        ):
            done.deleted.append(backup.name)
    return done
