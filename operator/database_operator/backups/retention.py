"""Which scheduled backups retention deletes: pure arithmetic over what the schedule made.

Only the backups a Database's schedule made are counted (on-demand ones are the user's to
delete), and only those of this very Database (its uid): a new Database that takes an old
one's name never ages the old one's backups away. A completed backup is kept while either rule
keeps it — among the newest ``count``, or younger than ``maxAge`` — and the newest completed
backup is always kept, so a schedule that stopped succeeding never lets ``maxAge`` delete every
backup there is. A failed scheduled backup goes once a later scheduled backup completed: it
stays as long as it is the news. Pending and running backups are never deleted.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from database_operator.api.backup import BackupPhase, Retention

_UNITS = {"h": timedelta(hours=1), "d": timedelta(days=1), "w": timedelta(weeks=1)}
_MAX_AGE = re.compile(r"^([1-9][0-9]*)([hdw])$")


def max_age(text: str) -> timedelta:
    """A retention maxAge ("36h", "30d", "8w") as a timedelta."""
    found = _MAX_AGE.match(text)
    if found is None:
        raise ValueError(f"maxAge {text!r} is not a number of hours, days or weeks (30d)")
    return int(found.group(1)) * _UNITS[found.group(2)]


@dataclass(frozen=True)
class Scheduled:
    """What retention needs to know of one scheduled backup."""

    name: str
    #: The due time the schedule took it for (its creation time, for an older one).
    scheduled_at: datetime
    phase: BackupPhase | None
    #: When it completed or failed (None while pending or running).
    finished_at: datetime | None = None


def expired(backups: Sequence[Scheduled], retention: Retention, now: datetime) -> list[str]:
    """The names of the backups ``retention`` deletes at ``now``, oldest first."""
    completed = sorted(
        (b for b in backups if b.phase is BackupPhase.COMPLETED),
        key=lambda b: (b.scheduled_at, b.name),
        reverse=True,
    )
    if not completed:
        return []
    oldest_age = max_age(retention.max_age) if retention.max_age else None
    gone: list[Scheduled] = []
    for index, backup in enumerate(completed[1:], start=1):  # the newest always stays
        counted = retention.count is not None and index < retention.count
        young = oldest_age is not None and now - (backup.finished_at or now) < oldest_age
        if not (counted or young):
            gone.append(backup)
    newest = completed[0].scheduled_at
    gone += [b for b in backups if b.phase is BackupPhase.FAILED and b.scheduled_at < newest]
    return [b.name for b in sorted(gone, key=lambda b: (b.scheduled_at, b.name))]
