"""What a Database's reconcile asks of its backups once its children are made, in one call
(`tend_backups`): its schedule kept — the backup that is due taken, those retention lets go
deleted (schedule.py) — and what its status says of them (`state.summarize`).

Its restore is asked apart, and earlier (restore.py): whether the Deployments may be made at
all is known before the children are written, what is said of the backups only after.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime

from database_operator.api.backup import DatabaseBackup
from database_operator.api.models import Database
from database_operator.backups import schedule, state
from database_operator.backups.schedule import Tended
from database_operator.backups.state import BackupSummary
from database_operator.kube.api import KubeApi


@dataclass(frozen=True)
class BackupsTended:
    """What one reconcile did and found of a Database's backups."""

    #: What its status says of them.
    summary: BackupSummary
    #: What its schedule did (nothing while it may not act).
    schedule: Tended = field(default_factory=Tended)


async def tend_backups(
    kube: KubeApi,
    db: Database,
    backups: Sequence[DatabaseBackup],
    now: datetime,
    *,
    keep_schedule: bool,
) -> BackupsTended:
    """Keep ``db``'s schedule when ``keep_schedule`` (not while the Database failed, or a
    child's name is taken), and say what its status says of its ``backups`` as they were found."""
    tended = await schedule.tend(kube, db, backups, now) if keep_schedule else Tended()
    return BackupsTended(state.summarize(db, backups, now), tended)
