"""The Services in front of the database pods: read-write to the primary, read-only to the
read replicas. With spec.monitoring each also has the exporter's port, named ``metrics``."""

from __future__ import annotations

from database_operator.api.models import EXPORTER_PORT_NAME, Database
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
from database_operator.desired.monitoring import enabled, exporter_facts
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
                {"name": port, "port": resolved_port(db), "targetPort": port, "protocol": "TCP"},
                *metrics_ports(db),
            ],
        },
    }


def metrics_ports(db: Database) -> list[Manifest]:
    """The exporter's port, on its own number, when monitoring is on; none otherwise (so a
    Service without monitoring is what earlier releases wrote)."""
    if not enabled(db):
        return []
    number = exporter_facts(db.spec.engine).port
    return [
        {
            "name": EXPORTER_PORT_NAME,
            "port": number,
            "targetPort": EXPORTER_PORT_NAME,
            "protocol": "TCP",
        }
    ]
