"""The Services in front of the database pods: read-write to the primary, read-only to the
read replicas. The engine's port only: the exporter's (spec.monitoring) is scraped on the pods
(the PodMonitor), never offered to the Services' clients, who with a LoadBalancer or NodePort
type may be outside the cluster."""

from __future__ import annotations

from database_operator.api.models import Database
from database_operator.desired.common import (
    PRIMARY,
    REPLICA,
    controlled_owner_references,
    engine_name,
    object_meta,
    read_replica_count,
    replicas_name,
    resolved_port,
    selector_labels,
)
from database_operator.manifest import Manifest


def service(db: Database) -> Manifest:
    """The read-write Service ``<name>``: the primary only. spec.port (or the engine's) to the
    container's named port, so a custom Service port never changes what the engine listens on."""
    return _service(db, db.name, PRIMARY)


def read_service(db: Database) -> Manifest | None:
    """The read-only Service ``<name>-replicas`` in front of the read replicas, or None when
    there are none."""
    if not read_replica_count(db):
        return None
    return _service(db, replicas_name(db), REPLICA)


def _service(db: Database, name: str, role: str) -> Manifest:
    port = engine_name(db)
    meta = object_meta(db, name, controlled_owner_references(db))
    if db.spec.service_annotations:
        meta["annotations"] = dict(db.spec.service_annotations)
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": meta,
        "spec": {
            "type": db.spec.service_type.value,
            "selector": selector_labels(db, role),
            "ports": [
                {"name": port, "port": resolved_port(db), "targetPort": port, "protocol": "TCP"}
            ],
        },
    }
