"""The Service in front of the database pods."""

from __future__ import annotations

from database_operator.api.models import Database
from database_operator.desired.common import (
    controlled_owner_references,
    engine_name,
    object_meta,
    resolved_port,
    selector_labels,
)
from database_operator.manifest import Manifest


def service(db: Database) -> Manifest:
    """The Service ``<name>``: spec.port (or the engine's) to the container's named port, so a
    custom Service port never changes what the engine listens on."""
    name = engine_name(db)
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": object_meta(db, db.name, controlled_owner_references(db)),
        "spec": {
            "type": db.spec.service_type.value,
            "selector": selector_labels(db),
            "ports": [
                {"name": name, "port": resolved_port(db), "targetPort": name, "protocol": "TCP"}
            ],
        },
    }
