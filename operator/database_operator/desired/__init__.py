"""Pure builders of a Database's desired children (design.md §2).

Given a Database, return the Kubernetes objects it should have, as plain camelCase dicts ready
for server-side apply. No I/O and no clock: the same Database always gives the same objects, so
a caller can compare, apply and test them freely.

- `children` is what every reconcile applies: the primary's Deployment and Service, the read
  replicas' Deployment and Service (when there are read replicas), the PVC with storage. With
  spec.failover, one Deployment (and claim) per instance instead of the primary's and the read
  replicas' Deployments, and the name holder ``<name>`` (no pod: it keeps an older operator
  from starting a primary there); the Services select the pods by the role the operator labels.
  `surplus` names those that must not exist (read replicas or instances scaled away).
- `secret` is separate: it needs a password and is created once, only when the Database has no
  credentialsSecretRef, and never re-applied (that would rotate the password).
- `connection_secret` is built from the credentials Secret's data.
"""

from __future__ import annotations

from database_operator.api.models import MAX_REPLICAS, Database
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
    has_instances,
    host,
    instance_count,
    instance_name,
    instance_names,
    instance_pvc_name,
    instances_config_name,
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
    reserved_username,
    secret,
)
from database_operator.desired.network import read_service, service
from database_operator.desired.policy import enabled as network_policy_enabled
from database_operator.desired.policy import network_policy
from database_operator.desired.storage import pvc, pvcs
from database_operator.desired.workload import (
    deployment,
    image,
    instance_deployments,
    name_holder,
    replicas_deployment,
)
from database_operator.manifest import Manifest


def _built(
    db: Database, credentials_checksum: str | None = None, operator_namespace: str | None = None
) -> list[Manifest]:
    policy = [found] if (found := network_policy(db, operator_namespace)) else []
    if has_instances(db):
        return [
            *instance_deployments(db, credentials_checksum),
            name_holder(db),
            service(db),
            *filter(None, [read_service(db)]),
            *pvcs(db),
            *policy,
        ]
    optional = [
        replicas_deployment(db, credentials_checksum),
        read_service(db),
        pvc(db),
        *policy,
    ]
    return [
        child
        for child in [deployment(db, credentials_checksum), service(db), *optional]
        if child is not None
    ]


def children(
    db: Database, credentials_checksum: str | None = None, operator_namespace: str | None = None
) -> list[Manifest]:
    """The children every reconcile applies, in the order they are written
    (``operator_namespace``: the operator's own, which the NetworkPolicy admits)."""
    return [stamped(child) for child in _built(db, credentials_checksum, operator_namespace)]


def child_keys(db: Database) -> list[tuple[str, str]]:
    """(kind, name) of the children the spec asks for, in order (no digest computed)."""
    return [(child["kind"], child["metadata"]["name"]) for child in _built(db)]


def surplus(db: Database) -> list[tuple[str, str]]:
    """(kind, name) of the children that must not exist for this spec: the read replicas'
    Deployment and Service when there are no read replicas; with spec.failover, the
    Deployments of the instances scaled away (their claims are kept) — but never the target
    primary's, whose data would be lost to writes — and the read replicas', for a Database
    moved to instances (its primary's gives way to the name holder)."""
    policy = [] if network_policy_enabled(db) else [("NetworkPolicy", db.name)]
    unwanted = [] if read_replica_count(db) else [("Service", replicas_name(db))]
    if not has_instances(db):
        if not read_replica_count(db):
            unwanted.insert(0, ("Deployment", replicas_name(db)))
        return unwanted + policy
    # A Database moved to instances: the read replicas' Deployment goes (the primary's is
    # replaced by the name holder, its selector being another).
    unwanted.append(("Deployment", replicas_name(db)))
    return (
        unwanted
        + [
            ("Deployment", instance_name(db, number))
            for number in range(instance_count(db) + 1, MAX_REPLICAS + 1)
            if instance_name(db, number) != db.status.target_primary
        ]
        + policy
    )


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
    "has_instances",
    "host",
    "image",
    "instance_count",
    "instance_deployments",
    "instance_name",
    "instance_names",
    "instance_pvc_name",
    "instances_config_name",
    "labels",
    "missing_credentials_keys",
    "owner_reference",
    "primary_count",
    "pvc",
    "pvc_name",
    "pvcs",
    "read_endpoint",
    "read_host",
    "read_replica_count",
    "read_service",
    "replicas_deployment",
    "replicas_name",
    "replication_keys_to_generate",
    "reserved_username",
    "resolved_port",
    "resolved_version",
    "retained_owner_references",
    "secret",
    "selector_labels",
    "selector_string",
    "service",
    "surplus",
]
