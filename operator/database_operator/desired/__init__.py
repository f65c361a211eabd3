"""Pure builders of a Database's desired children (design.md §2).

Given a Database, return the Kubernetes objects it should have, as plain camelCase dicts ready
for server-side apply. No I/O and no clock: the same Database always gives the same objects, so
a caller can compare, apply and test them freely.

- `children` is what every reconcile applies: the primary's Deployment and Service, the read
  replicas' Deployment and Service (when there are read replicas), the PVC with storage.
  `surplus` names those that must not exist (read replicas scaled away).
- `secret` is separate: it needs a password and is created once, only when the Database has no
  credentialsSecretRef, and never re-applied (that would rotate the password).
- `connection_secret` is built from the credentials Secret's data.
"""

from __future__ import annotations

from database_operator.api.models import Database
from database_operator.desired.binding import connection_entries, connection_secret
from database_operator.desired.common import (
    APPLIED_DIGEST_ANNOTATION,
    CREDENTIALS_ANNOTATION,
    CREDENTIALS_CHECKSUM_ANNOTATION,
    DATA_VOLUME,
    MANAGED_BY,
    PRIMARY,
    REPLICA,
    connection_secret_name,
    controlled_owner_references,
    credentials_secret_name,
    endpoint,
    generated_secret_name,
    host,
    labels,
    owner_reference,
    primary_count,
    pvc_name,
    read_endpoint,
    read_host,
    read_replica_count,
    replicas_name,
    resolved_port,
    resolved_version,
    retained_owner_references,
    selector_labels,
    selector_string,
    stamped,
)
from database_operator.desired.credentials import (
    credentials_checksum,
    decoded,
    generate_password,
    missing_credentials_keys,
    replication_keys_to_generate,
    secret,
)
from database_operator.desired.network import read_service, service
from database_operator.desired.storage import pvc
from database_operator.desired.workload import deployment, image, replicas_deployment
from database_operator.manifest import Manifest


def _built(db: Database, credentials_checksum: str | None = None) -> list[Manifest]:
    optional = [
        replicas_deployment(db, credentials_checksum),
        read_service(db),
        pvc(db),
    ]
    return [
        child
        for child in [deployment(db, credentials_checksum), service(db), *optional]
        if child is not None
    ]


def children(db: Database, credentials_checksum: str | None = None) -> list[Manifest]:
    """The children every reconcile applies, in the order they are written."""
    return [stamped(child) for child in _built(db, credentials_checksum)]


def child_keys(db: Database) -> list[tuple[str, str]]:
    """(kind, name) of the children the spec asks for, in order (no digest computed)."""
    return [(child["kind"], child["metadata"]["name"]) for child in _built(db)]


def surplus(db: Database) -> list[tuple[str, str]]:
    """(kind, name) of the children that must not exist for this spec: the read replicas'
    Deployment and Service when there are no read replicas."""
    if read_replica_count(db):
        return []
    return [("Deployment", replicas_name(db)), ("Service", replicas_name(db))]


__all__ = [
    "APPLIED_DIGEST_ANNOTATION",
    "CREDENTIALS_ANNOTATION",
    "CREDENTIALS_CHECKSUM_ANNOTATION",
    "DATA_VOLUME",
    "MANAGED_BY",
    "PRIMARY",
    "REPLICA",
    "Manifest",
    "child_keys",
    "children",
    "connection_entries",
    "connection_secret",
    "connection_secret_name",
    "controlled_owner_references",
    "credentials_checksum",
    "credentials_secret_name",
    "decoded",
    "deployment",
    "endpoint",
    "generate_password",
    "generated_secret_name",
    "host",
    "image",
    "labels",
    "missing_credentials_keys",
    "owner_reference",
    "primary_count",
    "pvc",
    "pvc_name",
    "read_endpoint",
    "read_host",
    "read_replica_count",
    "read_service",
    "replicas_deployment",
    "replicas_name",
    "replication_keys_to_generate",
    "resolved_port",
    "resolved_version",
    "retained_owner_references",
    "secret",
    "selector_labels",
    "selector_string",
    "service",
    "surplus",
]
