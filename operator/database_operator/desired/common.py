"""What every child shares: names, labels, owner references and the values the spec leaves to
the engine (version, port).

Kept in one place so that the Deployment, the Service, the status and the docs cannot disagree
about, say, which port a Database listens on.
"""

from __future__ import annotations

import hashlib
import json

from database_operator.api.models import (
    GROUP,
    KIND,
    ROLE_LABEL,
    SHARD_LABEL,
    VERSION,
    Database,
    DeletionPolicy,
)
from database_operator.engines import EngineFacts, facts
from database_operator.manifest import Manifest
from database_operator.ownership import CREATED_FOR, FIELD_MANAGER

#: The value of app.kubernetes.io/managed-by: the operator's field manager's name.
MANAGED_BY = FIELD_MANAGER
COMPONENT = "database"
#: Pod-template annotation naming the credentials Secret (the name only, never a value).
CREDENTIALS_ANNOTATION = f"{GROUP}/credentials-secret"
#: Pod-template annotation with a checksum of the credentials the pods read: a changed Secret
#: changes it, and so rolls the pods onto the new values.
CREDENTIALS_CHECKSUM_ANNOTATION = f"{GROUP}/credentials-checksum"
#: Name of the pod volume that holds the engine's data (a PVC or an emptyDir).
DATA_VOLUME = "data"
#: Annotation on every child the operator applies: a digest of the fields it sets. Comparing
#: desired with observed sees only the fields we set, so one we stop setting (a pod annotation,
#: a memory limit, a connection key) would never be taken back; a changed digest makes the next
#: apply, and server-side apply removes what our field manager no longer sets.
APPLIED_DIGEST_ANNOTATION = f"{GROUP}/applied-digest"


def stamped(manifest: Manifest) -> Manifest:
    """``manifest`` with its APPLIED_DIGEST_ANNOTATION; of a Secret's data only the keys count
    (the digest never depends on a secret value)."""
    shape = {**manifest}
    if "data" in shape:
        shape["data"] = sorted(shape["data"])
    text = json.dumps(shape, sort_keys=True, separators=(",", ":"))
    meta = manifest["metadata"]
    annotations = {
        **(meta.get("annotations") or {}),
        APPLIED_DIGEST_ANNOTATION: hashlib.sha256(text.encode()).hexdigest()[:16],
    }
    return {**manifest, "metadata": {**meta, "annotations": annotations}}


def container_security_context() -> Manifest:
    """The container part of the `restricted` Pod Security Standard, for every container of a
    database pod (the engine's and the metrics exporter's)."""
    return {
        "allowPrivilegeEscalation": False,
        "capabilities": {"drop": ["ALL"]},
        "runAsNonRoot": True,
    }


def engine_facts(db: Database) -> EngineFacts:
    """The facts of the Database's engine."""
    return facts(db.spec.engine)


def engine_name(db: Database) -> str:
    """The engine as a plain string: container name, port name and `app.kubernetes.io/name`."""
    return str(db.spec.engine.value)


def resolved_version(db: Database) -> str:
    """The version actually deployed: spec.version, else the engine's default.

    With spec.image set this is still what status reports: the operator cannot read a version
    out of an arbitrary image reference.
    """
    return db.spec.version or engine_facts(db).default_version


def resolved_port(db: Database) -> int:
    """The Service port: spec.port, else the engine's own port."""
    return db.spec.port or engine_facts(db).port


#: What a database pod is: the primary (reads and writes) or a read replica.
PRIMARY = "primary"
REPLICA = "replica"


def primary_count(db: Database) -> int:
    """Pods of the primary Deployment: 1, or 0 when the Database hibernates."""
    return min(db.spec.replicas, 1)


def read_replica_count(db: Database) -> int:
    """Read replicas: spec.replicas - 1, for engines whose replication the operator sets up."""
    return max(0, db.spec.replicas - 1) if engine_facts(db).replication else 0


def replicas_name(db: Database) -> str:
    """Name of the read replicas' Deployment and Service."""
    return f"{db.name}-replicas"


def host(db: Database) -> str:
    """The read-write Service's DNS name (the primary)."""
    return f"{db.name}.{db.namespace}.svc"


def read_host(db: Database) -> str:
    """The read-only Service's DNS name (the read replicas)."""
    return f"{replicas_name(db)}.{db.namespace}.svc"


def endpoint(db: Database) -> str:
    """Where clients read and write: ``<name>.<namespace>.svc:<port>``."""
    return f"{host(db)}:{resolved_port(db)}"


def read_endpoint(db: Database) -> str:
    """Where clients read from the replicas: ``<name>-replicas.<namespace>.svc:<port>``."""
    return f"{read_host(db)}:{resolved_port(db)}"


def connection_secret_name(db: Database) -> str:
    """The Secret an application binds to (servicebinding.io): host, port, uri, credentials."""
    return f"{db.name}-connection"


def generated_secret_name(db: Database) -> str:
    """The name of the Secret the operator generates when the spec names none."""
    return f"{db.name}-credentials"


def credentials_secret_name(db: Database) -> str:
    """The Secret the pods read credentials from: the user's, else the generated one."""
    if db.spec.credentials_secret_ref is not None:
        return db.spec.credentials_secret_ref.name
    return generated_secret_name(db)


def pvc_name(db: Database) -> str:
    """Name of the data volume claim (exists only with spec.storage)."""
    return f"{db.name}-data"


def has_instances(db: Database) -> bool:
    """Whether the Database runs as instances that fail over (spec.failover.enabled)."""
    return db.spec.failover is not None and db.spec.failover.enabled


def instance_count(db: Database) -> int:
    """Instances of a Database with spec.failover: spec.replicas, and at least the first (its
    Deployment is kept, with no pod, while the Database hibernates)."""
    return max(db.spec.replicas, 1)


def instance_name(db: Database, number: int) -> str:
    """Instance ``number`` (from 1): its Deployment and the value of its pod's instance label."""
    return f"{db.name}-{number}"


def instance_names(db: Database) -> list[str]:
    """The instances the spec asks for, in order."""
    return [instance_name(db, number) for number in range(1, instance_count(db) + 1)]


def instance_pvc_name(db: Database, instance: str) -> str:
    """An instance's claim: the first keeps ``<name>-data`` (the single primary's, so a backup
    or a restore finds the data where it always was), the others ``<instance>-data``."""
    return pvc_name(db) if instance == instance_name(db, 1) else f"{instance}-data"


def instances_config_name(db: Database) -> str:
    """The ConfigMap that names the target primary: each instance reads it as it starts."""
    return f"{db.name}-instances"


#: The key of the instances' ConfigMap that names the target primary.
TARGET_PRIMARY_KEY = "primary"


def selector_labels(db: Database, role: str | None = None) -> dict[str, str]:
    """The labels that pick this Database's pods (with ``role``: its primary or its read
    replicas): stable for its whole life, as a Deployment's selector is immutable."""
    selected = {
        "app.kubernetes.io/name": engine_name(db),
        "app.kubernetes.io/instance": db.name,
    }
    return selected | ({ROLE_LABEL: role} if role else {})


def labels(db: Database) -> dict[str, str]:
    """The labels on every child and on the pod template."""
    return {
        **selector_labels(db),
        "app.kubernetes.io/component": COMPONENT,
        "app.kubernetes.io/managed-by": MANAGED_BY,
    }


def object_labels(db: Database) -> dict[str, str]:
    """The labels on each child object: ``labels``, and the Database's shard (the operator of
    that shard watches its children by it). Not on the pod template: moving a Database to
    another shard must not restart its pods."""
    shard = (db.metadata.get("labels") or {}).get(SHARD_LABEL)
    return labels(db) | ({SHARD_LABEL: shard} if shard else {})


def selector_string(db: Database) -> str:
    """The pod selector as ``k=v,k=v`` (sorted), for status.selector and the scale subresource."""
    return ",".join(f"{key}={value}" for key, value in sorted(selector_labels(db).items()))


def owner_reference(db: Database, *, controller: bool) -> Manifest | None:
    """An owner reference to the Database, or None when it has no uid yet.

    Only an object read from the API server has a uid; an offline render of a file has none,
    and an owner reference without a uid is rejected, so it is left out there.
    """
    uid = db.metadata.get("uid")
    if not uid:
        return None
    return {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": KIND,
        "name": db.name,
        "uid": str(uid),
        "controller": controller,
        "blockOwnerDeletion": True,
    }


def retained_owner_references(db: Database) -> list[Manifest]:
    """Owner references for the data-bearing children (PVC, generated Secret).

    They are owned, and so garbage-collected with the Database, only with deletionPolicy
    Delete; with Retain they outlive it. Not a controller reference: the operator never
    needs to find the Database from these children.
    """
    if db.spec.deletion_policy is not DeletionPolicy.DELETE:
        return []
    reference = owner_reference(db, controller=False)
    return [reference] if reference is not None else []


def controlled_owner_references(db: Database) -> list[Manifest]:
    """The controller owner reference of the children that live and die with the Database."""
    reference = owner_reference(db, controller=True)
    return [reference] if reference is not None else []


def object_meta(db: Database, name: str, owner_references: list[Manifest]) -> Manifest:
    """metadata of a child that lives and dies with the Database: name, namespace, labels and
    owner references (if any)."""
    meta: Manifest = {"name": name, "namespace": db.namespace, "labels": object_labels(db)}
    if owner_references:
        meta["ownerReferences"] = owner_references
    return meta


def kept_object_meta(db: Database, name: str) -> Manifest:
    """metadata of a child that may outlive the Database (generated Secret, PVC): marked as
    created for it, so that the operator can tell it from a namesake it must not touch, and
    owned by it only with deletionPolicy Delete."""
    meta = object_meta(db, name, retained_owner_references(db))
    meta["annotations"] = {CREATED_FOR: db.name}
    return meta
