"""Pure builders of a Database's desired children (design.md §2).

Given a Database, return the Kubernetes objects it should have, as plain camelCase dicts ready
for server-side apply. No I/O and no clock: the same Database always gives the same objects, so
a caller can compare, apply and test them freely.

- `children` is what every reconcile applies (Deployment, Service, and the PVC with storage).
- `secret` is separate: it needs a password and is created once, only when the Database has no
  credentialsSecretRef, and never re-applied (that would rotate the password).
"""

from __future__ import annotations

from database_operator.api.models import Database
from database_operator.desired.common import (
    CREDENTIALS_ANNOTATION,
    CREDENTIALS_CHECKSUM_ANNOTATION,
    DATA_VOLUME,
    MANAGED_BY,
    controlled_owner_references,
    credentials_secret_name,
    endpoint,
    generated_secret_name,
    labels,
    owner_reference,
    pvc_name,
    resolved_port,
    resolved_version,
    retained_owner_references,
    selector_labels,
    selector_string,
)
from database_operator.desired.credentials import (
    credentials_checksum,
    generate_password,
    missing_credentials_keys,
    secret,
)
from database_operator.desired.network import service
from database_operator.desired.storage import pvc
from database_operator.desired.workload import deployment, image
from database_operator.manifest import Manifest


def children(db: Database, credentials_checksum: str | None = None) -> list[Manifest]:
    """The children every reconcile applies: Deployment, Service, and the PVC with storage."""
    claim = pvc(db)
    return [deployment(db, credentials_checksum), service(db)] + (
        [claim] if claim is not None else []
    )


__all__ = [
    "CREDENTIALS_ANNOTATION",
    "CREDENTIALS_CHECKSUM_ANNOTATION",
    "DATA_VOLUME",
    "MANAGED_BY",
    "Manifest",
    "children",
    "controlled_owner_references",
    "credentials_checksum",
    "credentials_secret_name",
    "deployment",
    "endpoint",
    "generate_password",
    "generated_secret_name",
    "image",
    "labels",
    "missing_credentials_keys",
    "owner_reference",
    "pvc",
    "pvc_name",
    "resolved_port",
    "resolved_version",
    "retained_owner_references",
    "secret",
    "selector_labels",
    "selector_string",
    "service",
]
