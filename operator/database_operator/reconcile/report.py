"""Writing a Database's status: computed from what was observed and done, patched through
/status only when it differs from the stored one, with an Event when the phase moves."""

from __future__ import annotations

from dataclasses import dataclass

from database_operator import tracing
from database_operator.api.models import Database, DatabaseStatus, Phase
from database_operator.backups.state import BackupSummary
from database_operator.clock import Clock
from database_operator.compare import merge_patch_of
from database_operator.events import EventSink
from database_operator.kube.api import KubeApi
from database_operator.manifest import Manifest
from database_operator.reasons import Problem, Reason
from database_operator.reconcile.observe import observe_workloads
from database_operator.status import Outcome, Workloads, compute_status


@dataclass(frozen=True)
class StatusWrite:
    """A status computed, and whether it was written."""

    status: DatabaseStatus
    #: ``status`` in its wire form, computed once: compared with the stored one, and what the
    #: reconcile's span events compare.
    wire: Manifest
    #: The Database as the patch returned it (None: the status did not change, nothing sent).
    body: Manifest | None


async def write_status(
    kube: KubeApi,
    db: Database,
    *,
    workloads: Workloads,
    outcome: Outcome,
    events: EventSink,
    now: Clock,
    backups: BackupSummary | None = None,
) -> StatusWrite:
    """Compute the new status; patch it through /status only when it differs from the stored
    one. ``backups``: what its backups say (None: not looked at; the status keeps what it
    said)."""
    new = compute_status(db, workloads, db.status, outcome, now(), backups=backups)
    wire = new.to_wire()
    patch = merge_patch_of(db.status.to_wire(), wire)
    if not patch:
        return StatusWrite(new, wire, None)
    attributes = {
        "database.phase": str(new.phase or ""),
        "database.previous_phase": str(db.status.phase or ""),
    }
    with tracing.span("write status", attributes):
        written = await kube.patch_status(db.namespace, db.name, patch)
    if new.phase != db.status.phase:
        if new.phase is Phase.FAILED:
            failure = outcome.failure or Problem(Reason.RECONCILE_ERROR)
            events("Warning", failure.reason, failure.message)
        elif db.status.phase is not None:  # the first phase is in the creation Event
            events(
                "Normal", f"Phase{new.phase}", f"phase {db.status.phase or 'None'} -> {new.phase}"
            )
    return StatusWrite(new, wire, written)


async def report_failure(
    kube: KubeApi, db: Database, error: Exception, events: EventSink, now: Clock
) -> Manifest | None:
    """Say in the Degraded condition that reconciling keeps failing, and why. Returns the
    Database as the status write returned it (None: nothing written; a Database being deleted
    says Deleting instead). Raises what the API raises: reporting is the caller's best effort."""
    if db.metadata.get("deletionTimestamp"):
        return None
    written = await write_status(
        kube,
        db,
        workloads=await observe_workloads(kube, db),
        outcome=Outcome(error=Problem(Reason.RECONCILE_ERROR, str(error))),
        events=events,
        now=now,
    )
    return written.body
