"""pydantic models of the Database API (design.md §1): the single source of the CRD schema.

Field names are snake_case in Python and camelCase on the wire (aliases). Validation rules that
need the old object (immutability, never-shrink) are CEL rules in ``x-kubernetes-validations``:
the API server enforces them; the models only carry them into the generated CRD.
"""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, JsonValue, WithJsonSchema
from pydantic.alias_generators import to_camel

from database_operator.engines import Engine

GROUP = "databases.example.com"
VERSION = "v1"
KIND = "Database"
PLURAL = "databases"

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
#: A DNS-1123 subdomain: what Kubernetes accepts as an object name.
NAME_PATTERN = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$"
#: A Database's name becomes its Service's name, a DNS-1035 label: a letter first, then
#: lowercase letters, digits and '-', no dots, a letter or digit last, at most 63 characters.
#: Stricter than a custom resource's own name rule, so the schema checks it at admission.
DATABASE_NAME_PATTERN = r"^[a-z]([-a-z0-9]*[a-z0-9])?$"
DATABASE_NAME_MAX_LENGTH = 63


def cel(rule: str, message: str, field_path: str | None = None) -> dict[str, JsonValue]:
    """One ``x-kubernetes-validations`` entry."""
    entry: dict[str, JsonValue] = {"rule": rule, "message": message}
    if field_path:
        entry["fieldPath"] = field_path
    return entry


class _Model(BaseModel):
    model_config = ConfigDict(
        alias_generator=to_camel,
        populate_by_name=True,
        use_enum_values=False,
        extra="ignore",
    )

    def to_wire(self) -> dict[str, Any]:
        """The object as the API server stores it (camelCase, unset fields left out)."""
        return self.model_dump(mode="json", by_alias=True, exclude_none=True)


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


class CredentialsSecretRef(_Model):
    """A Secret in the Database's namespace that holds the engine's credentials."""

    name: str = Field(
        min_length=1,
        max_length=253,
        pattern=NAME_PATTERN,
        description="Name of the Secret. It must hold the engine's keys: username and password "
        "(postgres, mysql) or password (redis).",
    )


class DatabaseSpec(_Model):
    """The desired state of a Database."""

    model_config = ConfigDict(
        json_schema_extra={
            "x-kubernetes-validations": [
                cel(
                    "!has(self.storage) || self.replicas <= 1",
                    "replicas must be 0 or 1 when storage is set: "
                    "a ReadWriteOnce volume cannot be shared",
                    ".replicas",
                ),
                cel(
                    "!has(oldSelf.storage) || has(self.storage)",
                    "storage cannot be removed once set",
                    ".storage",
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
        description="Engine version: the tag of the official image. "
        "Empty uses the engine's default "
        "(postgres 16, mysql 8.4, redis 7.4), reported in status.version.",
    )
    image: str | None = Field(
        default=None,
        max_length=512,
        description="Container image override. Empty uses the official image of engine:version.",
    )
    replicas: int = Field(
        default=1,
        ge=0,
        le=10,
        description="Number of database pods, 0 to 10; at most 1 with storage.",
    )
    port: int | None = Field(
        default=None,
        ge=1,
        le=65535,
        description="Service port. Empty uses the engine's port (5432, 3306, 6379).",
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
    deletion_policy: DeletionPolicy = Field(
        default=DeletionPolicy.RETAIN,
        description="What happens to the PVC and the generated Secret "
        "when the Database is deleted: "
        "Retain keeps them, Delete removes them.",
    )


class Phase(StrEnum):
    PENDING = "Pending"
    ACTIVE = "Active"
    DEGRADED = "Degraded"
    FAILED = "Failed"
    DELETING = "Deleting"


class ConditionStatus(StrEnum):
    TRUE = "True"
    FALSE = "False"
    UNKNOWN = "Unknown"


class Condition(_Model):
    """One aspect of the Database's state (metav1.Condition)."""

    type: str = Field(
        max_length=316, description="Type of the condition: Ready, Progressing or Degraded."
    )
    status: ConditionStatus = Field(description="True, False or Unknown.")
    observed_generation: int | None = Field(
        default=None, ge=0, description="The metadata.generation this condition was set for."
    )
    last_transition_time: datetime = Field(
        description="When the status last changed from one value to another."
    )
    reason: str = Field(max_length=1024, description="Machine-readable CamelCase reason.")
    message: str = Field(default="", max_length=32768, description="Human-readable details.")


class DatabaseStatus(_Model):
    """The observed state of a Database, written by the operator."""

    observed_generation: int | None = Field(
        default=None, description="The metadata.generation the last reconcile acted on."
    )
    phase: Phase | None = Field(
        default=None, description="Pending, Active, Degraded, Failed or Deleting."
    )
    version: str | None = Field(default=None, description="The engine version deployed.")
    replicas: int | None = Field(default=None, description="Pods of the Deployment.")
    ready_replicas: int | None = Field(default=None, description="Ready pods of the Deployment.")
    selector: str | None = Field(
        default=None, description="Label selector of the pods (scale subresource)."
    )
    endpoint: str | None = Field(default=None, description="<service>.<namespace>.svc:<port>")
    credentials_secret: str | None = Field(
        default=None, description="Name of the Secret that holds the credentials."
    )
    conditions: list[Condition] | None = Field(
        default=None,
        description="Ready, Progressing and Degraded.",
        json_schema_extra={"x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["type"]},
    )


class Database(_Model):
    """A database run by database-operator: a Deployment, a Service, a Secret and, with storage, a
    PersistentVolumeClaim."""

    api_version: str = f"{GROUP}/{VERSION}"
    kind: str = KIND
    metadata: dict[str, Any] = Field(default_factory=dict)
    spec: DatabaseSpec = Field(default_factory=DatabaseSpec)
    status: DatabaseStatus = Field(default_factory=DatabaseStatus)

    @property
    def name(self) -> str:
        return str(self.metadata.get("name", ""))

    @property
    def namespace(self) -> str:
        return str(self.metadata.get("namespace", "default"))
