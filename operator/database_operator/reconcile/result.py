"""What one reconcile found and did: for the controller to count, log and cache."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

from database_operator.api.models import DatabaseStatus
from database_operator.backups.state import BackupSummary
from database_operator.manifest import Manifest
from database_operator.reasons import REFUSED_WRITES
from database_operator.status import Outcome


@dataclass
class Result:
    """What one reconcile found and did."""

    status: DatabaseStatus
    outcome: Outcome
    #: ``status`` in its wire form, as computed to compare with the stored one (None: no status
    #: was computed, the Database is gone).
    status_wire: Manifest | None = None
    #: Children created (kind list); children rewritten because they differed (kind list).
    created: list[str] = field(default_factory=list)
    corrected: list[str] = field(default_factory=list)
    #: Kinds of the children written although the spec had not changed: drift put back.
    drift: list[str] = field(default_factory=list)
    #: Kinds whose lists were taken back from another field manager.
    taken_back: list[str] = field(default_factory=list)
    #: Kinds of the children deleted because the spec no longer asks for them.
    removed: list[str] = field(default_factory=list)
    #: Kinds of the children deleted and created anew (an immutable field had to change).
    recreated: list[str] = field(default_factory=list)
    #: The Database as our status write returned it (None: the status did not change).
    body: Manifest | None = None
    #: The Database turned out to be gone (or replaced): nothing was done.
    gone: bool = False
    #: What its backups say (None: not looked at), and what its schedule did.
    backups: BackupSummary | None = None
    backups_created: list[str] = field(default_factory=list)
    backups_deleted: list[str] = field(default_factory=list)
    #: When its backup schedule is next due (None: none).
    next_backup: datetime | None = None
    #: When its restore Job, whose pod waits to start, is stopped (None: none waits).
    job_deadline: datetime | None = None
    #: spec.failover: seconds until its instances are looked at again (None: no instances).
    look_again: float | None = None
    #: spec.failover: a failover completed, in this many seconds from the primary's loss.
    failed_over: float | None = None

    @property
    def status_written(self) -> bool:
        return self.body is not None

    @property
    def changed(self) -> bool:
        """Whether it wrote anything (a child, a list taken back, the status, a backup)."""
        return bool(
            self.created
            or self.corrected
            or self.status_written
            or self.taken_back
            or self.removed
            or self.backups_created
            or self.backups_deleted
        )

    @property
    def waits_for_a_change(self) -> bool:
        """A write was refused (or undone): only a change of the spec or a child can help."""
        failure = self.outcome.failure
        return failure is not None and failure.reason in REFUSED_WRITES

    @property
    def result(self) -> str:
        """'failed' for a spec that cannot be acted on, 'paused', 'gone', or 'success'."""
        if self.gone:
            return "gone"
        if self.outcome.failure:
            return "failed"
        return "paused" if self.outcome.paused else "success"
