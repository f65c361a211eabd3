"""The Deployment that runs the engine's official image.

Restricted pod security (non-root, no privilege escalation, no capabilities, RuntimeDefault
seccomp), credentials only by reference to the Secret, and probes from the engine's facts.
"""

from __future__ import annotations

from database_operator.api.models import Database
from database_operator.desired.common import (
    CREDENTIALS_ANNOTATION,
    CREDENTIALS_CHECKSUM_ANNOTATION,
    DATA_VOLUME,
    controlled_owner_references,
    credentials_secret_name,
    engine_facts,
    engine_name,
    labels,
    object_meta,
    pvc_name,
    resolved_version,
    selector_labels,
)
from database_operator.manifest import Manifest


def image(db: Database) -> str:
    """spec.image, else the engine's official image at the resolved version."""
    return db.spec.image or f"{engine_facts(db).image}:{resolved_version(db)}"


def strategy(db: Database) -> Manifest:
    """Recreate with storage, RollingUpdate without.

    A ReadWriteOnce volume cannot be mounted by the new pod while the old one holds it, so a
    rolling update would hang. The RollingUpdate parameters are spelled out (the API defaults)
    so that the field manager owns them and server-side apply drops them when the strategy
    turns to Recreate (the API rejects Recreate with rollingUpdate set).
    """
    if db.spec.storage is not None:
        return {"type": "Recreate"}
    return {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": "25%", "maxUnavailable": "25%"}}


def env(db: Database) -> list[Manifest]:
    """Credentials as secretKeyRef (never a literal value), then the engine's plain env."""
    secret_name = credentials_secret_name(db)
    from_secret: list[Manifest] = [
        {"name": var, "valueFrom": {"secretKeyRef": {"name": secret_name, "key": key}}}
        for var, key in engine_facts(db).secret_env.items()
    ]
    plain: list[Manifest] = [
        {"name": var, "value": value} for var, value in engine_facts(db).env.items()
    ]
    return from_secret + plain


def readiness_probe(db: Database) -> Manifest:
    """The engine's own "can I serve" command (a TCP check where the engine has none)."""
    command = engine_facts(db).ready_command
    check: Manifest = (
        {"exec": {"command": list(command)}}
        if command
        else {"tcpSocket": {"port": engine_name(db)}}
    )
    return {**check, "periodSeconds": 10, "timeoutSeconds": 5, "failureThreshold": 3}


def liveness_probe(db: Database) -> Manifest:
    """A TCP check, late and lenient: restart only a process that stopped listening, never one
    that is merely slow (initdb, crash recovery)."""
    return {"tcpSocket": {"port": engine_name(db)}, "initialDelaySeconds": 30, "periodSeconds": 10}


def container_security_context() -> Manifest:
    """The container part of the `restricted` Pod Security Standard."""
    return {
        "allowPrivilegeEscalation": False,
        "capabilities": {"drop": ["ALL"]},
        "runAsNonRoot": True,
    }


def pod_security_context(db: Database) -> Manifest:
    """Run as the UID the official image is built for; fsGroup makes the volume writable."""
    uid = engine_facts(db).uid
    return {
        "runAsNonRoot": True,
        "runAsUser": uid,
        "runAsGroup": uid,
        "fsGroup": uid,
        "seccompProfile": {"type": "RuntimeDefault"},
    }


def data_volume(db: Database) -> Manifest:
    """The claim with storage; an emptyDir (data lost with the pod) without."""
    if db.spec.storage is not None:
        return {"name": DATA_VOLUME, "persistentVolumeClaim": {"claimName": pvc_name(db)}}
    return {"name": DATA_VOLUME, "emptyDir": {}}


def container(db: Database) -> Manifest:
    """The one database container."""
    facts = engine_facts(db)
    name = engine_name(db)
    spec: Manifest = {
        "name": name,
        "image": image(db),
        "ports": [{"name": name, "containerPort": facts.port, "protocol": "TCP"}],
        "env": env(db),
        "readinessProbe": readiness_probe(db),
        "livenessProbe": liveness_probe(db),
        "securityContext": container_security_context(),
        "volumeMounts": [{"name": DATA_VOLUME, "mountPath": facts.data_path}],
    }
    if facts.args:
        spec["args"] = list(facts.args)
    if db.spec.resources is not None:
        spec["resources"] = db.spec.resources.to_wire()
    return spec


def pod_template(db: Database, credentials_checksum: str | None = None) -> Manifest:
    """The pod: labelled, hardened, one container, one data volume.

    ``credentials_checksum`` (see desired.credentials_checksum) rolls the pods when the
    credentials change; None leaves it out (an offline render has no Secret to read).
    """
    annotations = {CREDENTIALS_ANNOTATION: credentials_secret_name(db)}
    if credentials_checksum:
        annotations[CREDENTIALS_CHECKSUM_ANNOTATION] = credentials_checksum
    return {
        "metadata": {"labels": labels(db), "annotations": annotations},
        "spec": {
            # A database needs no API access.
            "automountServiceAccountToken": False,
            # Service links would inject e.g. POSTGRES_PORT=tcp://... for any Service named
            # like an engine, which the official images' entrypoints may misread.
            "enableServiceLinks": False,
            "securityContext": pod_security_context(db),
            "containers": [container(db)],
            "volumes": [data_volume(db)],
        },
    }


def deployment(db: Database, credentials_checksum: str | None = None) -> Manifest:
    """The Deployment ``<name>``, controlled by the Database."""
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": object_meta(db, db.name, controlled_owner_references(db)),
        "spec": {
            "replicas": db.spec.replicas,
            "selector": {"matchLabels": selector_labels(db)},
            "strategy": strategy(db),
            "template": pod_template(db, credentials_checksum),
        },
    }
