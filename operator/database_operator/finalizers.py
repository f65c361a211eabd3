"""The operator's finalizer on its own objects (every Database and DatabaseBackup): whether one
carries it, adding it with the labels the object lacks, and removing exactly it, each in one
guarded JSON patch. What must be done before it goes is the caller's: a Database's in
reconcile/finalizer.py, a DatabaseBackup's in backups/."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from database_operator.api.models import GROUP, KIND
from database_operator.compare import json_pointer, version_test
from database_operator.kube.api import KubeApi
from database_operator.manifest import Manifest

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
            {"op": "add", "path": json_pointer(("metadata", "labels", key)), "value": value}
            for key, value in labelled.items()
        ]
    return await kube.json_patch(kind, meta["namespace"], meta["name"], operations)


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
