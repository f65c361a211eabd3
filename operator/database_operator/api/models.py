"""pydantic models of the Database API (design.md §1): the single source of the CRD schema.

Field names are snake_case in Python and camelCase on the wire (aliases). Validation rules that
need the old object (immutability, never-shrink) are CEL rules in ``x-kubernetes-validations``:
the API server enforces them; the models only carry them into the generated CRD.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated

from pydantic import ConfigDict, Field, JsonValue, WithJsonSchema

from database_operator.api.backup import BackupPolicy, BackupRecord, RestoreRecord, RestoreSource
from database_operator.api.common import (
    DATABASE_NAME_MAX_LENGTH,
    DATABASE_NAME_PATTERN,
    GROUP,
    NAME_PATTERN,
    VERSION,
    Condition,
    ConditionStatus,
    Resource,
    _Model,
    cel,
)
from database_operator.api.core import (
    Affinity,
    NetworkPolicyPeer,
    Toleration,
    TopologySpreadConstraint,
)
from database_operator.engines import ENGINES, Engine

__all__ = [
    "DATABASE_NAME_MAX_LENGTH",
    "DATABASE_NAME_PATTERN",
    "GROUP",
    "NAME_PATTERN",
    "VERSION",
    "Condition",
    "ConditionStatus",
    "cel",
]

#: The label on each database pod that says whether it is the primary or a read replica.
ROLE_LABEL = f"{GROUP}/role"
#: The label on each pod of a Database with spec.failover that names its instance
#: (``<name>-<n>``): the instance's Deployment selects its pods by it. Its role label is set by
#: the operator, on the pod, once the engine has confirmed the role.
INSTANCE_LABEL = f"{GROUP}/instance"
#: The annotation on a Database (spec.failover) that asks for a switchover: ``<instance>`` or
#: ``any`` (the most advanced standby), then, after a space, anything that makes the request
#: new (``kubectl database switchover`` writes the time). Each value is answered once.
SWITCHOVER_ANNOTATION = f"{GROUP}/switchover"
#: The label on a Database (and the operator copies it to its children) that assigns it to a
#: shard: an operator started with --shard=NAME reconciles only the Databases labelled NAME.
SHARD_LABEL = f"{GROUP}/shard"
#: The labels the operator puts on every pod: a Database's podLabels may not set them.
OWNED_POD_LABELS = (
    "app.kubernetes.io/name",
    "app.kubernetes.io/instance",
    "app.kubernetes.io/component",
    "app.kubernetes.io/managed-by",
    ROLE_LABEL,
    INSTANCE_LABEL,
)
#: Namespace annotations that cap the Databases of a namespace (absent: no cap), checked by the
#: validating webhook.
MAX_DATABASES = f"{GROUP}/max-databases"
MAX_STORAGE = f"{GROUP}/max-storage"
KIND = "Database"
#: The most instances a Database may have (spec.replicas).
MAX_REPLICAS = 10
PLURAL = "databases"
#: The name of the Database CustomResourceDefinition.
CRD_NAME = f"{PLURAL}.{GROUP}"

#: A Kubernetes resource quantity ("10Gi", "500m", 2), as core/v1 writes it in OpenAPI.
QUANTITY_PATTERN = (
    r"^(\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))(([KMGTPE]i)|[numkMGTPE]"
    r"|([eE](\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))))?$"
)
Quantity = Annotated[
    int | Annotated[str, Field(pattern=QUANTITY_PATTERN)],
    WithJsonSchema(
        {
            "anyOf": [{"type": "integer"}, {"type": "string"}],
            "pattern": QUANTITY_PATTERN,
            "x-kubernetes-int-or-string": True,
        }
    ),
]

#: An image tag: what `docker tag` accepts.
TAG_PATTERN = r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$"


class ServiceType(StrEnum):
    CLUSTER_IP = "ClusterIP"
    NODE_PORT = "NodePort"
    LOAD_BALANCER = "LoadBalancer"


class DeletionPolicy(StrEnum):
    RETAIN = "Retain"
    DELETE = "Delete"


class Storage(_Model):
    """Persistent storage: a PersistentVolumeClaim named <name>-data, mounted at the engine's data
    directory. Without it data lives in an emptyDir and is lost with the pod."""

    model_config = ConfigDict(
        json_schema_extra={
            "x-kubernetes-validations": [
                cel(
                    "quantity(string(self.size)).compareTo(quantity(string(oldSelf.size))) >= 0",
                    "storage.size may grow but never shrink",
                    ".size",
                ),
                cel(
                    "!has(oldSelf.storageClassName) || (has(self.storageClassName)"
                    " && self.storageClassName == oldSelf.storageClassName)",
                    "storage.storageClassName is immutable once set",
                    ".storageClassName",
                ),
            ]
        }
    )

    size: Quantity = Field(
        description="Size of the volume, a quantity such as 10Gi. May grow, never shrink.",
        json_schema_extra={
            "x-kubernetes-validations": [
                cel(
                    "isQuantity(string(self))"
                    " && quantity(string(self)).isGreaterThan(quantity('0'))",
                    "storage.size must be a quantity above zero, such as 10Gi",
                )
            ]
        },
    )
    storage_class_name: str | None = Field(
        default=None,
        max_length=253,
        pattern=NAME_PATTERN,
        description="StorageClass of the volume; empty uses the cluster default. "
        "Immutable once set.",
    )


class ResourceClaim(_Model):
    """A dynamic resource claim of the pod that the container uses (core/v1 ResourceClaim)."""

    name: str = Field(min_length=1, description="Name of an entry of the pod's resourceClaims.")
    request: str | None = Field(default=None, description="Name of a request of that claim.")


class ResourceRequirements(_Model):
    """Compute resources of the database container (core/v1 ResourceRequirements)."""

    claims: list[ResourceClaim] | None = Field(
        default=None,
        description="Dynamic resource claims the container uses.",
        json_schema_extra={"x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name"]},
    )

    limits: dict[str, Quantity] | None = Field(
        default=None, description="Maximum compute resources allowed, e.g. cpu: 500m, memory: 1Gi."
    )
    requests: dict[str, Quantity] | None = Field(
        default=None,
        description="Minimum compute resources required, e.g. cpu: 100m, memory: 256Mi.",
    )


#: The metrics exporter's container (spec.monitoring), the name of its port on the pods, and the
#: init container that makes the credentials of an exporter with a user of its own (Redis).
EXPORTER_CONTAINER = "metrics-exporter"
EXPORTER_PORT_NAME = "metrics"
EXPORTER_CREDENTIALS_CONTAINER = "monitoring-credentials"


class Monitoring(_Model):
    """A Prometheus metrics exporter beside the engine in every pod of the Database.

    It reads the engine's credentials by reference from the Secret the pods already read, and
    has no probes: an exporter that cannot reach the engine says so in its metrics, and never
    takes the pod out of its Service.
    """

    enabled: bool = Field(
        default=False,
        description="Run the engine's community exporter (postgres_exporter, mysqld_exporter, "
        f"redis_exporter) in each pod, serving /metrics on the pods' port named "
        f"`{EXPORTER_PORT_NAME}` (never on the Services). Turning it on or off rolls the pods.",
    )
    image: str | None = Field(
        default=None,
        min_length=1,
        max_length=512,
        description="The exporter's image, instead of the pinned release the operator is "
        "tested with ("
        + "; ".join(
            f"{engine}: {facts.exporter.image}"
            for engine, facts in ENGINES.items()
            if facts.exporter is not None
        )
        + "). The image policy of the admission webhook applies to it as to spec.image.",
    )
    resources: ResourceRequirements | None = Field(
        default=None, description="Compute resources of the exporter container."
    )


#: Engines whose instances the operator fails over (spec.failover).
FAILOVER_ENGINES = (Engine.POSTGRES, Engine.REDIS)


class Failover(_Model):
    """Instances that fail over: each its own Deployment and volume, the primary promoted from
    the most advanced replica when it is lost (docs/architecture.md, "Instances and failover")."""

    enabled: bool = Field(
        default=False,
        description="Run the Database as instances <name>-1 .. <name>-<replicas>, each with its "
        "own Deployment and (with spec.storage) its own volume, and promote a replica when the "
        "primary's pod or engine is lost. PostgreSQL and Redis. May be turned on for a running "
        "Database: its primary restarts once, on its volume, as <name>-1, and its read "
        "replicas are replaced by instances with volumes of their own. Never off again.",
        json_schema_extra={
            "x-kubernetes-validations": [
                cel(
                    "self || !oldSelf",
                    "spec.failover.enabled cannot be turned off: the instances' volumes and "
                    "roles have no way back to a primary and read replicas",
                )
            ]
        },
    )
    delay: int = Field(
        default=5,
        ge=0,
        le=3600,
        description="Seconds the primary must be lost (its pod gone, not running, or its engine "
        "not answering) before a replica is promoted.",
    )
    max_lag: int = Field(
        default=16 * 1024 * 1024,
        ge=0,
        description="Bytes a replica may lack (PostgreSQL: of WAL; Redis: of its replication "
        "offset), against the last position the primary was seen at, and still be promoted: a "
        "replica further behind is never promoted (writes wait for the primary instead).",
    )
    synchronous: bool = Field(
        default=False,
        description="Zero-loss mode (PostgreSQL): the primary acknowledges a commit only once "
        "a replica has it too (synchronous_standby_names 'ANY 1 (*)'), so a failover, which "
        "promotes the most advanced replica, loses no acknowledged write. Writes wait while no "
        "replica is connected. Redis has no such mode (its WAIT is the client's to call): "
        "refused for Redis. May be turned on and off at any time: no pod restarts.",
    )


#: The namespace whose Prometheus may scrape a Database's exporter when its NetworkPolicy names
#: no metricsFrom (the label every namespace carries since Kubernetes 1.22).
MONITORING_NAMESPACE = "monitoring"
NAMESPACE_NAME_LABEL = "kubernetes.io/metadata.name"


class NetworkPolicy(_Model):
    """A NetworkPolicy ``<name>`` the operator keeps for the Database's pods: only what a
    Database needs may reach them (docs/operations.md, "Network policy for the database pods").
    It restricts what comes in, never what goes out; enforced only by a network plugin that
    implements NetworkPolicy."""

    enabled: bool = Field(
        default=False,
        description="Keep the NetworkPolicy: the engine's port open to clientsFrom, to the "
        "Database's own pods (replication, backup and restore Jobs) and, with spec.failover, "
        "to the operator's namespace (it asks each engine its role); the exporter's port "
        "(spec.monitoring) to metricsFrom; nothing else. Off: the operator deletes the one it "
        "made. No pod restarts either way.",
    )
    clients_from: list[NetworkPolicyPeer] | None = Field(
        default=None,
        max_length=32,
        description="Who may connect to the engine's port, as NetworkPolicy peers. Absent: "
        "every pod of the Database's namespace; [] : none but the Database's own pods and the "
        "operator.",
    )
    metrics_from: list[NetworkPolicyPeer] | None = Field(
        default=None,
        max_length=32,
        description="Who may scrape the exporter's port (spec.monitoring). Absent: the pods of "
        f"the namespace named `{MONITORING_NAMESPACE}`.",
    )


class CredentialsSecretRef(_Model):
    """A Secret in the Database's namespace that holds the engine's credentials."""

    name: str = Field(
        min_length=1,
        max_length=253,
        pattern=NAME_PATTERN,
        description="Name of the Secret. It must hold the engine's keys ("
        + "; ".join(
            f"{engine}: {', '.join(facts.secret_keys)}" for engine, facts in ENGINES.items()
        )
        + ").",
    )


def _reserved_parameters_rule(engine: Engine) -> dict[str, JsonValue]:
    """spec.parameters may not set what the operator sets for ``engine`` (compared as the engine
    does: case and '-'/'_' aside)."""
    reserved = ", ".join(
        f"'{key.lower().replace('_', '-')}'" for key in ENGINES[engine].reserved_parameters
    )
    normal = "k.lowerAscii().replace('_', '-')"
    return cel(
        f"!has(self.engine) || self.engine != '{engine}' || !has(self.parameters) || "
        f"self.parameters.all(k, !({normal} in [{reserved}]))",
        f"spec.parameters may not set what the operator sets for {engine}: "
        f"{', '.join(ENGINES[engine].reserved_parameters)}",
        ".parameters",
        f"'spec.parameters.' + self.parameters.filter(k, {normal} in [{reserved}])[0] + "
        f"' is set by the operator for {engine} (port, data, replication and passwords are "
        "its own): remove it'",
    )


class DatabaseSpec(_Model):
    """The desired state of a Database."""

    model_config = ConfigDict(
        json_schema_extra={
            "x-kubernetes-validations": [
                *[
                    cel(
                        # has(): the CRD's default spec ({}) is checked before defaults apply.
                        f"!has(self.engine) || self.engine != '{engine}' || "
                        "!has(self.replicas) || self.replicas <= 1",
                        f"replicas must be 0 or 1 for {engine}: the operator does not set up "
                        f"{engine} replication (yet), and more than one independent {engine} "
                        "behind one Service would be different databases",
                        ".replicas",
                    )
                    for engine, facts in ENGINES.items()
                    if not facts.replication
                ],
                cel(
                    "!has(self.failover) || !has(self.failover.enabled) || !self.failover.enabled"
                    " || !has(self.engine) || self.engine in ["
                    + ", ".join(f"'{engine}'" for engine in FAILOVER_ENGINES)
                    + "]",
                    "spec.failover is available for "
                    + ", ".join(FAILOVER_ENGINES)
                    + " only (for now)",
                    ".failover",
                ),
                cel(
                    "!has(self.failover) || !has(self.failover.synchronous)"
                    " || !self.failover.synchronous || !has(self.engine)"
                    f" || self.engine == '{Engine.POSTGRES}'",
                    "spec.failover.synchronous is for postgres only: Redis acknowledges a write "
                    "before any replica has it, and only its clients can wait (WAIT)",
                    ".failover.synchronous",
                ),
                cel(
                    "!has(oldSelf.failover) || has(self.failover)",
                    "spec.failover cannot be removed once set",
                    ".failover",
                ),
                cel(
                    "!has(oldSelf.storage) || has(self.storage)",
                    "storage cannot be removed once set",
                    ".storage",
                ),
                *[_reserved_parameters_rule(engine) for engine in ENGINES],
                cel(
                    "has(self.restore) == has(oldSelf.restore)",
                    "spec.restore is given when a Database is created, and kept: it cannot be "
                    "added to a Database that exists (restore into a new one) or removed",
                    ".restore",
                ),
                cel(
                    "!has(self.restore) || has(self.storage)",
                    "spec.restore needs spec.storage: the data is restored onto the Database's "
                    "volume before its first pod starts",
                    ".restore",
                ),
                cel(
                    "!has(self.restore) || !has(self.restore.location) "
                    "|| has(self.restore.destination) || has(self.backup)",
                    "spec.restore.location needs restore.destination or spec.backup.destination: "
                    "where the backup is stored",
                    ".restore",
                ),
            ]
        }
    )

    engine: Engine = Field(
        default=Engine.POSTGRES,
        description="Database engine. Immutable.",
        json_schema_extra={
            "x-kubernetes-validations": [cel("self == oldSelf", "engine is immutable")]
        },
    )
    version: str | None = Field(
        default=None,
        pattern=TAG_PATTERN,
        max_length=128,
        description="Engine version: the tag of the official image. Empty uses the engine's "
        "default ("
        + ", ".join(f"{engine} {facts.default_version}" for engine, facts in ENGINES.items())
        + "), reported in status.version.",
    )
    image: str | None = Field(
        default=None,
        max_length=512,
        description="Container image override. Empty uses the official image of engine:version.",
    )
    replicas: int = Field(
        default=1,
        ge=0,
        le=MAX_REPLICAS,
        description="Instances of this one database, 0 to 10: 0 hibernates it (the data "
        "stays), 1 runs the primary, more add read replicas that follow the primary with the "
        "engine's own replication ("
        + ", ".join(engine for engine, facts in ENGINES.items() if facts.replication)
        + "; others at most 1). Read replicas keep no volume: they clone the primary when "
        "they start.",
    )
    port: int | None = Field(
        default=None,
        ge=1,
        le=65535,
        description="Service port. Empty uses the engine's port ("
        + ", ".join(f"{engine} {facts.port}" for engine, facts in ENGINES.items())
        + ").",
    )
    storage: Storage | None = Field(
        default=None, description="Persistent storage; empty for ephemeral data."
    )
    resources: ResourceRequirements | None = Field(
        default=None, description="Compute resources of the database container."
    )
    credentials_secret_ref: CredentialsSecretRef | None = Field(
        default=None,
        description="Existing Secret with the credentials. Empty: the operator generates "
        "<name>-credentials with a random password.",
    )
    service_type: ServiceType = Field(
        default=ServiceType.CLUSTER_IP, description="Type of the Service in front of the database."
    )
    paused: bool = Field(
        default=False, description="When true the operator changes no child; status says so."
    )
    deletion_protection: bool = Field(
        default=False,
        description="When true the Database cannot be deleted: the admission webhook refuses "
        "the DELETE until this is set back to false.",
    )
    deletion_policy: DeletionPolicy = Field(
        default=DeletionPolicy.RETAIN,
        description="What happens to the PVC and the generated Secret "
        "when the Database is deleted: "
        "Retain keeps them, Delete removes them.",
    )
    parameters: dict[str, Annotated[str, Field(max_length=4096)]] | None = Field(
        default=None,
        max_length=64,
        description="Engine settings, e.g. max_connections: '200', passed to the engine ("
        + ", ".join(f"{engine} as {facts.parameter_style}" for engine, facts in ENGINES.items())
        + "). Settings the operator owns (port, data directory, replication, passwords) are "
        "refused. A change rolls the pods.",
    )
    node_selector: dict[str, str] | None = Field(
        default=None, description="Labels a node must have to run the database pods."
    )
    tolerations: list[Toleration] | None = Field(
        default=None, description="Taints the database pods tolerate."
    )
    affinity: Affinity | None = Field(
        default=None, description="Node and pod (anti-)affinity of the database pods."
    )
    topology_spread_constraints: list[TopologySpreadConstraint] | None = Field(
        default=None,
        description="How the database pods spread over zones or nodes; give a labelSelector "
        "such as app.kubernetes.io/instance: <name>.",
    )
    priority_class_name: str | None = Field(
        default=None, max_length=253, description="PriorityClass of the database pods."
    )
    pod_annotations: dict[str, str] | None = Field(
        default=None, description="Annotations on the database pods."
    )
    pod_labels: dict[str, str] | None = Field(
        default=None,
        description="Labels on the database pods; not the app.kubernetes.io/ labels and the "
        "role label the operator sets.",
        json_schema_extra={
            "x-kubernetes-validations": [
                cel(
                    "self.all(k, !(k in ["
                    + ", ".join(f"'{label}'" for label in OWNED_POD_LABELS)
                    + "]))",
                    "podLabels may not set the labels the operator selects its pods by: "
                    + ", ".join(OWNED_POD_LABELS),
                )
            ]
        },
    )
    service_annotations: dict[str, str] | None = Field(
        default=None,
        description="Annotations on the Services, e.g. for a cloud load balancer.",
    )
    monitoring: Monitoring | None = Field(
        default=None,
        description="Metrics of the database itself: an exporter sidecar Prometheus scrapes. "
        "It has no probes: its failure never takes a pod out of its Service.",
    )
    failover: Failover | None = Field(
        default=None,
        description="High availability: instances with their own storage, and a replica "
        "promoted when the primary is lost. Set at creation.",
    )
    network_policy: NetworkPolicy | None = Field(
        default=None,
        description="Opt-in: a NetworkPolicy that lets only clients, replication, backups, the "
        "operator and Prometheus reach the database pods.",
    )
    backup: BackupPolicy | None = Field(
        default=None,
        description="Backups: where they are stored and, optionally, a schedule and how many "
        "to keep. Take one on demand with a DatabaseBackup.",
    )
    restore: RestoreSource | None = Field(
        default=None,
        description="Create this Database from a backup: its data is restored onto the "
        "volume before the first pod starts, so the Database is first Ready with it. Set at "
        "creation only; needs spec.storage.",
        json_schema_extra={
            "x-kubernetes-validations": [
                cel("self == oldSelf", "spec.restore cannot change once the Database exists")
            ]
        },
    )


class Phase(StrEnum):
    PENDING = "Pending"
    ACTIVE = "Active"
    DEGRADED = "Degraded"
    FAILED = "Failed"
    DELETING = "Deleting"


class Binding(_Model):
    """The Secret an application binds to (servicebinding.io)."""

    name: str = Field(description="Name of the Secret, in the Database's namespace.")


class InstanceRole(StrEnum):
    PRIMARY = "primary"
    REPLICA = "replica"
    #: Its engine has not said (it does not answer, or it is starting): no Service selects it.
    UNKNOWN = "unknown"


class InstanceStatus(_Model):
    """One instance as the operator last saw it (spec.failover)."""

    name: str = Field(description="The instance: its Deployment and the label on its pod.")
    role: InstanceRole = Field(description="What its engine says it is.")
    ready: bool = Field(description="Its pod is Ready.")
    pod: str | None = Field(default=None, description="Its pod, if one runs.")
    lag_bytes: int | None = Field(
        default=None,
        description="A replica's WAL not yet received, against the primary's position.",
    )
    timeline: int | None = Field(default=None, description="Its PostgreSQL timeline.")
    streaming: bool | None = Field(
        default=None, description="A replica's link to the primary is up (it receives writes)."
    )


class DatabaseStatus(_Model):
    """The observed state of a Database, written by the operator."""

    observed_generation: int | None = Field(
        default=None, description="The metadata.generation the last reconcile acted on."
    )
    phase: Phase | None = Field(
        default=None, description="Pending, Active, Degraded, Failed or Deleting."
    )
    version: str | None = Field(default=None, description="The engine version deployed.")
    replicas: int | None = Field(
        default=None, description="Database pods: the primary and the read replicas."
    )
    ready_replicas: int | None = Field(default=None, description="Ready database pods.")
    primary_ready: bool | None = Field(default=None, description="Whether the primary is ready.")
    read_replicas: int | None = Field(
        default=None, description="Read replicas wanted (spec.replicas - 1 where they exist)."
    )
    ready_read_replicas: int | None = Field(default=None, description="Ready read replicas.")
    selector: str | None = Field(
        default=None, description="Label selector of the pods (scale subresource)."
    )
    endpoint: str | None = Field(
        default=None, description="Read-write endpoint (the primary): <name>.<namespace>.svc:<port>"
    )
    read_endpoint: str | None = Field(
        default=None,
        description="Read-only endpoint (the read replicas): "
        "<name>-replicas.<namespace>.svc:<port>",
    )
    binding: Binding | None = Field(
        default=None,
        description="The Secret with the connection details (servicebinding.io Provisioned "
        "Service): host, port, database, username, password, uri.",
    )
    credentials_secret: str | None = Field(
        default=None, description="Name of the Secret that holds the credentials."
    )
    last_successful_backup: BackupRecord | None = Field(
        default=None, description="The newest DatabaseBackup of this Database that completed."
    )
    last_failed_backup: BackupRecord | None = Field(
        default=None, description="The newest DatabaseBackup of this Database that failed."
    )
    restored_from: RestoreRecord | None = Field(
        default=None, description="The backup this Database was created from (spec.restore)."
    )
    current_primary: str | None = Field(
        default=None,
        description="spec.failover: the instance that serves writes, as its engine confirmed.",
    )
    target_primary: str | None = Field(
        default=None,
        description="spec.failover: the instance chosen to serve writes; differs from "
        "currentPrimary while a failover is under way.",
    )
    instances: list[InstanceStatus] | None = Field(
        default=None, description="spec.failover: each instance's role, readiness and lag."
    )
    conditions: list[Condition] | None = Field(
        default=None,
        description="Ready, Progressing and Degraded; BackupHealthy with spec.backup.",
        json_schema_extra={"x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["type"]},
    )


class Database(Resource):
    """A database run by database-operator: a Deployment, a Service, a Secret and, with storage, a
    PersistentVolumeClaim."""

    api_version: str = f"{GROUP}/{VERSION}"
    kind: str = KIND
    spec: DatabaseSpec = Field(default_factory=DatabaseSpec)
    status: DatabaseStatus = Field(default_factory=DatabaseStatus)
