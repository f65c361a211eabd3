"""The end of a Database's life: the operator's finalizer holds it until the data-bearing
children are dealt with (kept or deleted, as deletionPolicy says), then lets it go."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from database_operator import desired
from database_operator.api.models import GROUP, KIND, Database, DeletionPolicy
from database_operator.clock import Clock, system_clock
from database_operator.compare import owner_refs_to
from database_operator.events import EventSink, no_events
from database_operator.kube import KubeApi
from database_operator.manifest import Manifest
from database_operator.ownership import is_ours
from database_operator.reconcile.apply import owner_references_patch
from database_operator.reconcile.observe import observe_workloads, read_child
from database_operator.reconcile.report import write_status
from database_operator.reconcile.takeback import version_test
from database_operator.status import Outcome

#: The operator's finalizer on every Database (and DatabaseBackup). The name Kopf used for it
#: before.
FINALIZER = f"{GROUP}/finalizer"


def has_finalizer(body: Mapping[str, Any]) -> bool:
    return FINALIZER in (body.get("metadata", {}).get("finalizers") or [])


def missing_labels(body: Mapping[str, Any], labels: Mapping[str, str]) -> dict[str, str]:
    """Those of ``labels`` the object lacks or holds with another value."""
    held = body.get("metadata", {}).get("labels") or {}
    return {key: value for key, value in labels.items() if held.get(key) != value}


async def add_finalizer(
    kube: KubeApi,
    body: Mapping[str, Any],
    kind: str = KIND,
    labels: Mapping[str, str] | None = None,
) -> Manifest:
    """Add our finalizer (if missing) and ``labels`` (those missing) to a Database (or an
    object of ``kind``), in one write; returns it as it now is."""
    meta = body["metadata"]
    operations: list[Manifest] = []
    # Creating a list or a map must not replace one that someone wrote meanwhile.
    creates = not meta.get("finalizers")
    labelled = missing_labels(body, labels or {})
    if creates or (labelled and not meta.get("labels")):
        operations.append(version_test(dict(body)))
    if not has_finalizer(body):
        operations.append(
            {"op": "add", "path": "/metadata/finalizers", "value": [FINALIZER]}
            if creates
            else {"op": "add", "path": "/metadata/finalizers/-", "value": FINALIZER}
        )
    if labelled and not meta.get("labels"):
        operations.append({"op": "add", "path": "/metadata/labels", "value": labelled})
    else:
        operations += [
            {"op": "add", "path": f"/metadata/labels/{_pointer(key)}", "value": value}
            for key, value in labelled.items()
        ]
    return await kube.json_patch(kind, meta["namespace"], meta["name"], operations)


def _pointer(key: str) -> str:
    """A map key as a JSON Pointer token (RFC 6901)."""
    return key.replace("~", "~0").replace("/", "~1")


async def remove_finalizer(kube: KubeApi, body: Mapping[str, Any], kind: str = KIND) -> Manifest:
    """Remove our finalizer: exactly that list element, whatever else changed meanwhile.
    Returns the object as the API server left it ({} if it was gone), for the caller to keep:
    until the watch tells it, a held copy still carrying the finalizer would be finalized
    again by the next wake-up."""
    meta = body["metadata"]
    index = (meta.get("finalizers") or []).index(FINALIZER)
    path = f"/metadata/finalizers/{index}"
    return await kube.json_patch(
        kind,
        meta["namespace"],
        meta["name"],
        [{"op": "test", "path": path, "value": FINALIZER}, {"op": "remove", "path": path}],
        missing_ok=True,
    )


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
