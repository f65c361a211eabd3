"""The Deployments that run the engine's official image: the primary, and the read replicas.

The primary (`<name>`, one pod, the PVC with storage) and the read replicas (`<name>-replicas`,
spec.replicas - 1 pods, ephemeral data cloned from the primary at every start) run the command
lines of replication.py. Restricted pod security (non-root, no privilege escalation, no
capabilities, RuntimeDefault seccomp), credentials only by reference to the Secret, probes from
the engine's facts, and the user's placement (node selector, tolerations, affinity, topology
spread, priority class) and engine settings. With spec.monitoring, the metrics exporter
(monitoring.py) runs beside the engine in every pod, primary and read replicas alike.
"""

from __future__ import annotations

from database_operator import replication
from database_operator.api.models import INSTANCE_LABEL, ROLE_LABEL, Database
from database_operator.desired import monitoring
from database_operator.desired.common import (
    CREDENTIALS_ANNOTATION,
    CREDENTIALS_CHECKSUM_ANNOTATION,
    DATA_VOLUME,
    PRIMARY,
    REPLICA,
    TARGET_PRIMARY_KEY,
    container_security_context,
    controlled_owner_references,
    credentials_secret_name,
    engine_facts,
    engine_name,
    host,
    instance_names,
    instance_pvc_name,
    instances_config_name,
    labels,
    object_meta,
    owner_reference,
    primary_count,
    pvc_name,
    read_replica_count,
    replicas_name,
    resolved_port,
    resolved_version,
    selector_labels,
)
from database_operator.engines import parameter_args
from database_operator.manifest import Manifest
from database_operator.ownership import HOLDS_NAME_FOR

#: The name holder's component label: no database pod has it, so it selects none.
NAME_HOLDER_COMPONENT = "name-holder"


def image(db: Database) -> str:
    """spec.image, else the engine's official image at the resolved version."""
    return db.spec.image or f"{engine_facts(db).image}:{resolved_version(db)}"


def strategy(db: Database, role: str = PRIMARY, instance: str | None = None) -> Manifest:
    """Recreate for a primary with storage and for an instance, RollingUpdate otherwise.

    A ReadWriteOnce volume cannot be mounted by the new pod while the old one holds it, so a
    rolling update would hang. The RollingUpdate parameters are spelled out (the API defaults)
    so that the field manager owns them and server-side apply drops them when the strategy
    turns to Recreate (the API rejects Recreate with rollingUpdate set). An instance is one
    engine with one identity: two pods of it at once would be two servers on its name.
    """
    if instance is not None or (db.spec.storage is not None and role == PRIMARY):
        return {"type": "Recreate"}
    return {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": "25%", "maxUnavailable": "25%"}}


def env(
    db: Database, recipe: replication.Recipe | None = None, instance: str | None = None
) -> list[Manifest]:
    """Credentials as secretKeyRef (never a literal value), then the engine's and the recipe's
    plain env. The replication keys are optional: a single instance runs without them. An
    instance reads the target primary from its ConfigMap: the kubelet resolves it at each start
    of the container, so a restart after a failover knows its new role."""
    secret_name = credentials_secret_name(db)
    facts = engine_facts(db)

    def from_secret(var: str, key: str, optional: bool) -> Manifest:
        ref: Manifest = {"name": secret_name, "key": key}
        if optional:
            ref["optional"] = True
        return {"name": var, "valueFrom": {"secretKeyRef": ref}}

    plain = facts.env | (recipe.env if recipe is not None else {})
    target: list[Manifest] = []
    if instance is not None:
        config = {"name": instances_config_name(db), "key": TARGET_PRIMARY_KEY}
        target = [{"name": "TARGET_PRIMARY", "valueFrom": {"configMapKeyRef": config}}]
    return (
        [from_secret(var, key, False) for var, key in facts.secret_env.items()]
        + [from_secret(var, key, True) for var, key in facts.replication_env.items()]
        + target
        + [{"name": var, "value": value} for var, value in plain.items()]
    )


def settings(db: Database) -> list[str]:
    """spec.parameters on the engine's command line; ``$(`` doubled so that the kubelet, which
    expands ``$(VAR)`` in a container's command and args, leaves the user's text alone."""
    return [
        arg.replace("$(", "$$(") for arg in parameter_args(db.spec.engine, db.spec.parameters or {})
    ]


def recipe(db: Database, role: str, instance: str | None = None) -> replication.Recipe:
    """What the container of ``role`` (or of ``instance``) runs (replication.py)."""
    facts = engine_facts(db)
    if instance is not None:
        return replication.instance(
            db.spec.engine,
            name=instance,
            port=facts.port,
            data_dir=facts.data_path,
            primary_host=host(db),
            primary_port=resolved_port(db),
            settings=settings(db),
        )
    if role == PRIMARY:
        return replication.primary(
            db.spec.engine, port=facts.port, data_dir=facts.data_path, settings=settings(db)
        )
    return replication.replica(
        db.spec.engine,
        port=facts.port,
        data_dir=facts.data_path,
        primary_host=host(db),
        primary_port=resolved_port(db),
        settings=settings(db),
    )


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


def pod_security_context(db: Database) -> Manifest:
    """Run as the UID the official image is built for; fsGroup makes the volume writable.

    ``OnRootMismatch``: the kubelet gives the volume to the group once, while its root is not
    yet the group's, instead of at every mount. Otherwise each new pod makes every file on it
    group-writable again, and PostgreSQL refuses to start on a data directory that is not 0700
    or 0750 (seen on a real node when the primary's pod was replaced); the official image's
    entrypoint happens to chmod it back at each start, which no other image need do. Also
    spares a large volume the recursive walk at each start.
    """
    uid = engine_facts(db).uid
    return {
        "runAsNonRoot": True,
        "runAsUser": uid,
        "runAsGroup": uid,
        "fsGroup": uid,
        "fsGroupChangePolicy": "OnRootMismatch",
        "seccompProfile": {"type": "RuntimeDefault"},
    }


def has_claim(db: Database, role: str = PRIMARY, instance: str | None = None) -> bool:
    """Whether the pod of ``role`` (or ``instance``) keeps its data on a claim."""
    return db.spec.storage is not None and (instance is not None or role == PRIMARY)


def data_volume(db: Database, role: str = PRIMARY, instance: str | None = None) -> Manifest:
    """The claim for a primary or an instance with storage; an emptyDir (data lost with the
    pod) otherwise."""
    if has_claim(db, role, instance):
        claim = pvc_name(db) if instance is None else instance_pvc_name(db, instance)
        return {"name": DATA_VOLUME, "persistentVolumeClaim": {"claimName": claim}}
    return {"name": DATA_VOLUME, "emptyDir": {}}


#: Seconds a pod without a claim keeps serving after it is told to stop (see `pre_stop`).
DRAIN_SECONDS = 5


def pre_stop(db: Database, role: str, instance: str | None = None) -> Manifest | None:
    """For a pod without a claim: keep the server up for DRAIN_SECONDS after the pod starts
    terminating, so that kube-proxy has taken it out of its Services before its address goes.

    Otherwise a client or a replica that reaches the Service in that second is sent to an
    address nobody answers any more, and waits for its connect timeout: on a real node a Redis
    replica hung 60 s (repl-timeout) after the primary rolled. Not for a pod with the claim: a
    deleted pod's replacement starts at once on the same volume, and the old server must not
    outlive its delete by longer than its own shutdown. Nor for an instance: the operator
    takes it out of its Service by its role label before it is stopped."""
    if instance is not None or has_claim(db, role):
        return None
    return {"exec": {"command": ["sleep", str(DRAIN_SECONDS)]}}


def container(db: Database, role: str = PRIMARY, instance: str | None = None) -> Manifest:
    """The one database container."""
    facts = engine_facts(db)
    name = engine_name(db)
    run = recipe(db, role, instance)
    mounts = [{"name": DATA_VOLUME, "mountPath": facts.data_path}]
    spec: Manifest = {
        "name": name,
        "image": image(db),
        "ports": [{"name": name, "containerPort": facts.port, "protocol": "TCP"}],
        "env": env(db, run, instance) + monitoring.engine_env(db),
        "readinessProbe": readiness_probe(db),
        "livenessProbe": liveness_probe(db),
        "securityContext": container_security_context(),
        "volumeMounts": mounts
        + ([monitoring.credentials_mount()] if monitoring.own_user(db) else []),
    }
    if run.command:
        spec["command"] = run.command
    if run.args:
        spec["args"] = run.args
    lifecycle: Manifest = {}
    if run.post_start:
        lifecycle["postStart"] = {"exec": {"command": run.post_start}}
    if drain := pre_stop(db, role, instance):
        lifecycle["preStop"] = drain
    if lifecycle:
        spec["lifecycle"] = lifecycle
    if db.spec.resources is not None:
        spec["resources"] = db.spec.resources.to_wire()
    return spec


def placement(db: Database) -> Manifest:
    """Where the pods may run: the user's scheduling fields, as the pod spec names them."""
    spec = db.spec
    found: Manifest = {
        "nodeSelector": spec.node_selector,
        "tolerations": [t.to_wire() for t in spec.tolerations] if spec.tolerations else None,
        "affinity": spec.affinity.to_wire() if spec.affinity else None,
        "topologySpreadConstraints": (
            [c.to_wire() for c in spec.topology_spread_constraints]
            if spec.topology_spread_constraints
            else None
        ),
        "priorityClassName": spec.priority_class_name,
    }
    return {key: value for key, value in found.items() if value}


def pod_template(
    db: Database,
    credentials_checksum: str | None = None,
    role: str = PRIMARY,
    instance: str | None = None,
) -> Manifest:
    """The pod: labelled, hardened, placed, the engine's container (and the metrics exporter's
    with spec.monitoring), one data volume.

    ``credentials_checksum`` (see desired.credentials_checksum) rolls the pods when the
    credentials change; None leaves it out (an offline render has no Secret to read). An
    instance's pod is labelled with the instance, not a role: the operator labels the role on
    the pod once the engine has confirmed it (failover/).
    """
    annotations = dict(db.spec.pod_annotations or {})
    annotations[CREDENTIALS_ANNOTATION] = credentials_secret_name(db)
    if credentials_checksum:
        annotations[CREDENTIALS_CHECKSUM_ANNOTATION] = credentials_checksum
    identity = {ROLE_LABEL: role} if instance is None else {INSTANCE_LABEL: instance}
    pod_labels = (db.spec.pod_labels or {}) | labels(db) | identity
    template: Manifest = {
        "metadata": {"labels": pod_labels, "annotations": annotations},
        "spec": {
            # A database needs no API access.
            "automountServiceAccountToken": False,
            # Service links would inject e.g. POSTGRES_PORT=tcp://... for any Service named
            # like an engine, which the official images' entrypoints may misread.
            "enableServiceLinks": False,
            "securityContext": pod_security_context(db),
            # Nothing is added without monitoring: the template stays what earlier releases
            # wrote, so an upgrade rolls no pod.
            "containers": [
                container(db, role, instance),
                *filter(None, [monitoring.exporter_container(db)]),
            ],
            "volumes": [data_volume(db, role, instance)],
            **placement(db),
        },
    }
    if init := monitoring.credentials_init_container(db, image(db)):
        template["spec"]["initContainers"] = [init]
        template["spec"]["volumes"].append(monitoring.credentials_volume())
    return template


def deployment(db: Database, credentials_checksum: str | None = None) -> Manifest:
    """The primary's Deployment ``<name>`` (one pod; none while hibernating)."""
    return _deployment(db, db.name, primary_count(db), credentials_checksum, PRIMARY)


def replicas_deployment(db: Database, credentials_checksum: str | None = None) -> Manifest | None:
    """The read replicas' Deployment ``<name>-replicas``, or None when there are none."""
    count = read_replica_count(db)
    if not count:
        return None
    return _deployment(db, replicas_name(db), count, credentials_checksum, REPLICA)


def instance_deployments(db: Database, credentials_checksum: str | None = None) -> list[Manifest]:
    """spec.failover: one Deployment per instance, ``<name>-<n>``, one pod each (none while
    hibernating), selected by the instance label."""
    return [
        _deployment(db, name, primary_count(db), credentials_checksum, PRIMARY, instance=name)
        for name in instance_names(db)
    ]


def name_holder(db: Database) -> Manifest:
    """spec.failover: the Deployment ``<name>``, which runs no pod and holds the name of the
    single primary's Deployment. An operator older than spec.failover (a rollback) finds it
    foreign (no controller reference: ownership.py) and refuses the Database with a
    ChildNameConflict, instead of starting a second primary on ``<name>-data`` beside
    ``<name>-1``. Its pod, should anyone scale it, mounts nothing and exits at once."""
    owner = owner_reference(db, controller=False)
    meta = object_meta(db, db.name, [owner] if owner else [])
    meta["labels"] |= {"app.kubernetes.io/component": NAME_HOLDER_COMPONENT}
    meta["annotations"] = {HOLDS_NAME_FOR: db.name}
    selector = selector_labels(db) | {"app.kubernetes.io/component": NAME_HOLDER_COMPONENT}
    container = {
        "name": "holder",
        "image": image(db),
        "command": ["false"],
        "securityContext": container_security_context(),
    }
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": meta,
        "spec": {
            "replicas": 0,
            "selector": {"matchLabels": selector},
            "template": {
                "metadata": {"labels": selector},
                "spec": {
                    "automountServiceAccountToken": False,
                    "securityContext": {
                        "runAsNonRoot": True,
                        "runAsUser": 65534,
                        "seccompProfile": {"type": "RuntimeDefault"},
                    },
                    "containers": [container],
                },
            },
        },
    }


def _deployment(
    db: Database,
    name: str,
    replicas: int,
    credentials_checksum: str | None,
    role: str,
    *,
    instance: str | None = None,
) -> Manifest:
    selector = (
        selector_labels(db, role)
        if instance is None
        else selector_labels(db) | {INSTANCE_LABEL: instance}
    )
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": object_meta(db, name, controlled_owner_references(db)),
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": selector},
            "strategy": strategy(db, role, instance),
            "template": pod_template(db, credentials_checksum, role, instance),
        },
    }
