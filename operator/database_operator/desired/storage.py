"""The PersistentVolumeClaim that keeps the data (only with spec.storage)."""

from __future__ import annotations

from database_operator.api.models import Database
from database_operator.desired.common import (
    has_instances,
    instance_names,
    instance_pvc_name,
    kept_object_meta,
    pvc_name,
)
from database_operator.manifest import Manifest


def pvcs(db: Database) -> list[Manifest]:
    """Every claim with spec.storage: ``<name>-data``, and with spec.failover one for each
    further instance (``<name>-<n>-data``), alike."""
    first = pvc(db)
    if first is None:
        return []
    if not has_instances(db):
        return [first]
    names = [instance_pvc_name(db, instance) for instance in instance_names(db)]
    return [first] + [_named(first, name) for name in names if name != pvc_name(db)]


def _named(claim: Manifest, name: str) -> Manifest:
    return claim | {"metadata": claim["metadata"] | {"name": name}}


def pvc(db: Database) -> Manifest | None:
    """The claim ``<name>-data``, or None without spec.storage.

    Owned by the Database only with deletionPolicy Delete, so Retain keeps the data after the
    Database is gone. The size is a string quantity even if the spec gave an integer.
    """
    storage = db.spec.storage
    if storage is None:
        return None
    spec: Manifest = {
        "accessModes": ["ReadWriteOnce"],
        "resources": {"requests": {"storage": str(storage.size)}},
    }
    if storage.storage_class_name:
        spec["storageClassName"] = storage.storage_class_name
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": kept_object_meta(db, pvc_name(db)),
        "spec": spec,
    }
