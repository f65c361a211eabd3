"""The end of a Database's life: before the operator's finalizer (finalizers.py) lets it go,
the data-bearing children are dealt with (kept or deleted, as deletionPolicy says)."""

from __future__ import annotations

from database_operator import desired
from database_operator.api.models import Database, DeletionPolicy
from database_operator.clock import Clock, system_clock
from database_operator.compare import owner_refs_to
from database_operator.events import EventSink, no_events
from database_operator.kube.api import KubeApi
from database_operator.ownership import is_ours
from database_operator.reconcile.apply import owner_references_patch
from database_operator.reconcile.observe import observe_workloads, read_child
from database_operator.reconcile.report import write_status
from database_operator.status import Outcome


async def finalize(
    kube: KubeApi,
    db: Database,
    events: EventSink = no_events,
    now: Clock = system_clock,
) -> list[str]:
    """The Database is being deleted: say so in status, then apply deletionPolicy to the
    children that may outlive it — only those the operator created (ownership.py):

    - Delete: delete them now (their owner reference would let the garbage collector do it too);
    - Retain: make sure they carry no owner reference to it, so the garbage collector keeps them
      even if the policy was switched to Retain just before the delete.

    Deployment and Service go with their controller owner reference (garbage collector).
    Returns what was deleted or released, e.g. ["deleted PersistentVolumeClaim"]. Idempotent:
    run it again after any failure.
    """
    await write_status(
        kube,
        db,
        workloads=await observe_workloads(kube, db),
        outcome=Outcome(deleting=True),
        events=events,
        now=now,
    )

    done: list[str] = []
    kept = [("PersistentVolumeClaim", desired.pvc_name(db))]
    generated = desired.generated_secret_name(db)
    if desired.credentials_secret_name(db) != generated or db.spec.credentials_secret_ref is None:
        # The Secret the operator generated, even if the spec has named another since; never
        # the one the spec names.
        kept.append(("Secret", generated))
    uid = str(db.metadata.get("uid", ""))
    for kind, name in kept:
        observed = await read_child(kube, db, kind, name)
        if observed is None or not is_ours(observed, db):
            continue
        if db.spec.deletion_policy is DeletionPolicy.DELETE:
            if await kube.delete(kind, db.namespace, name, observed["metadata"]["uid"]):
                done.append(f"deleted {kind}")
                events("Normal", "Deleted", f"deleted {kind} {name} (deletionPolicy: Delete)")
        elif owner_refs_to(observed, uid):
            patch = {"metadata": owner_references_patch(db, observed, [])}
            await kube.merge_patch(kind, db.namespace, name, patch)
            done.append(f"kept {kind}")
    return done
